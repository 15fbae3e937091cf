"""Inspector page views: frame layers, JPEG cache, navigation, timeline, group stepper, run summary."""
