package notify

// Options configures New. The zero value is what the app uses: the
// session's own notification service, "Carapace" as the application's name
// and no icon. The same type serves every platform; a field a platform has
// no use for is ignored there, as its comment says.
//
// Every platform's New has the same signature:
//
//	func New(log *slog.Logger, opts Options) (Notifier, error)
//
// It returns an error wrapping ErrUnavailable when the desktop offers no
// notification service at all (no session bus, no bundle identifier, an
// unsupported platform): the app then runs with its menu alone. A service
// that exists but cannot show buttons is not an error: New succeeds and
// Permission says why approvals must come from the menu. A nil log
// discards the Notifier's log.
type Options struct {
	// AppName is the application name the desktop shows with each
	// notification; "" means "Carapace". macOS ignores it (the bundle's
	// name is shown).
	AppName string
	// Icon is, on Linux, an icon name of the desktop's theme or an
	// absolute path or file:// URI of an image; "" shows none (the desktop
	// may fall back to the application's icon). macOS ignores it (the
	// bundle's icon is shown).
	Icon string
	// BusAddress is, on Linux, the D-Bus address of the session bus;
	// "" means the session's bus, from DBUS_SESSION_BUS_ADDRESS (or
	// $XDG_RUNTIME_DIR/bus). A bus is never launched. Tests point it at a
	// private bus. Other platforms ignore it.
	BusAddress string
}
