// Package statemachine holds the property test of the record lifecycle:
// random interleavings of ingest, redrive, settle, sweeper and operator
// actions against the real store on the emulator, checked against a model.
package statemachine
