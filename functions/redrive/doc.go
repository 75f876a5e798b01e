// Package redrive will hold the redrive function, which replays quarantined
// records into their source queue (issue 3). It has no code yet: the
// template deploys no redrive function until it does.
package redrive
