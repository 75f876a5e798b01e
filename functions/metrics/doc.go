// Package metrics will hold the scheduled metrics function, which publishes
// DLQ health to CloudWatch (issue 5). It has no code yet: the template
// deploys no metrics function until it does.
package metrics
