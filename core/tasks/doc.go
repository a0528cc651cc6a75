// Package tasks is the scheduler of Carapace's scheduled tasks: it works out
// when each task fires, keeps an account of every occurrence and starts the
// session that runs it.
//
// The schedule computation — cron, every and at schedules, in a task's IANA
// time zone and across daylight-saving transitions — lives in schedule.go.
// The store and the scheduler loop come in other files.
package tasks
