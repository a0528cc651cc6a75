// The C interface of notify_darwin.m, for notify_darwin.go. Every
// function may be called from any thread; none waits for the main
// thread or runs a run loop (fyne.io/systray owns the app's). Errors
// are returned as C strings from malloc, for the caller to free.
#include <stdint.h>

// carapace_notify_bundled reports whether the process has a bundle
// identifier. Without one, the notification centre raises an
// Objective-C exception that ends the process: nothing else here may be
// called then.
int carapace_notify_bundled(void);

// carapace_notify_start sets the delegate, registers the approval
// categories (Approve and Deny; Deny only), withdraws notifications left by an earlier process and asks
// for authorization (the answer arrives in carapaceNotifyAuthorized).
char *carapace_notify_start(void);

// carapace_notify_stop detaches the delegate.
void carapace_notify_stop(void);

// carapace_notify_settings reads the notification settings; they arrive
// in carapaceNotifyDone(call, ...).
void carapace_notify_settings(uint64_t call);

// carapace_notify_show adds an approval notification, offering Approve
// and Deny when approve is not 0, else Deny only; the centre's answer
// arrives in carapaceNotifyDone(call, ...).
void carapace_notify_show(uint64_t call, const char *key, const char *title, const char *body, int approve);

// carapace_notify_remove withdraws the delivered and pending
// notifications with identifier key.
char *carapace_notify_remove(const char *key);
