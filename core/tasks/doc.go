// Package tasks is the scheduler of Carapace's scheduled tasks: it works out
// when each task fires, keeps an account of every occurrence and asks the
// core to start the session that runs it.
//
//   - schedule.go: cron, every and at schedules, in a task's IANA time zone
//     and across daylight-saving transitions (a local time that does not
//     exist fires once at the end of the gap; a repeated one fires once, at
//     its first occurrence). robfig/cron/v3 parses cron expressions, and
//     nothing more.
//   - store.go: the SQLite database (tasks and their runs).
//   - scheduler.go: the Scheduler. Each occurrence is claimed in the
//     database (unique on task and scheduled time) before its session
//     starts, and ends ok, failed, skipped (missed, overlap, paused) or
//     unknown (the core died while it ran; never rerun by itself). After a
//     sleep or a restart the missed slots are worked out from wall time:
//     one catch-up run, late, and the rest skipped (or all skipped), with
//     catch-ups paced per group. Its clock is injected, so every rule is
//     tested on a fake one.
package tasks
