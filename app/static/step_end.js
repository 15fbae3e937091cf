// The last candidate: the slider knows its own range (the slider's elem_id filled in by app.static.step_js).
(r) => Number(document.querySelector('#' + __SLIDER__ + ' input[type=range]')?.max ?? r)
