// The C interface of loginitem_darwin.m, for loginitem_darwin.go. The
// functions may be called from any thread; none touches AppKit or waits
// for the main thread. Strings returned are from malloc, for the caller
// to free.

// carapace_loginitem_bundle returns the path of the running app bundle,
// or NULL if the process has no bundle identifier or is not an .app.
char *carapace_loginitem_bundle(void);

// carapace_loginitem_status returns SMAppService.mainAppService's status
// (SMAppServiceStatus), -1 if macOS is older than 13, or -2 with *err
// set if an Objective-C exception was raised.
int carapace_loginitem_status(char **err);

// carapace_loginitem_set registers (on != 0) or unregisters the app;
// it returns NULL on success, else the error.
char *carapace_loginitem_set(int on);
