// The open comparison is kept in this browser's localStorage, so that a reload opens it again.
(c) => { if (c) localStorage.setItem('lensComparison', c); return []; }
