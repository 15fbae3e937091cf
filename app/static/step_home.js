// The first candidate: no server needed.
(r) => 0
