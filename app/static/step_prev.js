// One frame back: no server needed.
(r) => Math.max(0, Math.round(r) - 1)
