package main

import (
	"github.com/carapace-dev/carapace/app/calaccess"
	"github.com/carapace-dev/carapace/app/loginitem"
	"github.com/carapace-dev/carapace/app/notify"
)

// platform is what the desktop gives the app: a notifier and a login
// item, either of which may be nil (the menu then carries the approvals,
// and "Start at login" is disabled). newPlatform, in platform_*.go,
// builds them.
type platform struct {
	notifier  notify.Notifier
	loginItem loginitem.Item
	calendar  calaccess.Access // nil but on macOS
}
