// Package sweeper will hold the scheduled sweeper function, which ages
// PARKED and RESOLVED records into S3 Object Lock storage (issue 4). It has
// no code yet: the template deploys no sweeper until it does.
package sweeper
