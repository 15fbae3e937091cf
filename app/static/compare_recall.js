// Page load: the comparison this browser showed last (compare_remember.js), else the one the server offers.
(c) => [localStorage.getItem('lensComparison') || c]
