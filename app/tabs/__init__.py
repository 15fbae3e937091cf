"""The app's tabs and panels: each builds its components and wires them to plain handlers."""
