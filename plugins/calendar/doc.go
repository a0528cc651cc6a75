// Package calendar is the calendar plugin: the user's calendars and
// reminders as tools (calendar_list, calendar_create, calendar_update,
// calendar_delete, reminder_list, reminder_create, reminder_complete),
// served out of process by plugins/calendar/handler, confined, its network
// only the configured CalDAV server through the core's egress point.
//
// The tools work through a Backend: CalDAV (this package, any platform:
// iCloud, Fastmail, Nextcloud, Radicale, ...) and, on macOS, EventKit
// (backend_darwin.go, when built). Recurring events are expanded here
// (RRULE, RDATE, EXDATE and RECURRENCE-ID overrides) in the events' own
// zones, so that times stay right across a change of daylight saving time;
// results are given in the user's zone. Calendar text is someone else's
// words (an invitation comes from anyone): the manifest marks every tool
// that returns it as untrusted output.
package calendar
