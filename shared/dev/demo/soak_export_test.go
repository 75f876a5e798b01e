package demo

// SoakAims are the soak's aimed crash points, by function, for the test.
var SoakAims = soakAims
