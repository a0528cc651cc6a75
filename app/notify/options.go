package notify

// Options configure New. A platform uses the fields it needs and ignores
// the others.
type Options struct {
	// AppName is the application name the notification server shows
	// (Linux). macOS takes it from the bundle (CFBundleName).
	AppName string
	// Icon is the notifications' icon: a themed icon name or a file path
	// (Linux). macOS always shows the bundle's icon.
	Icon string
	// BusAddress is the D-Bus session bus to use; empty means the
	// session's own (Linux; tests point it at a private bus).
	BusAddress string
}
