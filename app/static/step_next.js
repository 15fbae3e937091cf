// One frame on, up to the slider's maximum (the slider's elem_id filled in by app.static.step_js).
(r) => Math.min(Number(document.querySelector('#' + __SLIDER__ + ' input[type=range]')?.max ?? r), Math.round(r) + 1)
