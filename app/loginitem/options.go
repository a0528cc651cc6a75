package loginitem

// Options configure New. A platform uses the fields it needs and ignores
// the others.
type Options struct {
	// Exec is the program to start at login, an absolute path (Linux:
	// the autostart file's Exec). macOS starts the running app's bundle
	// and ignores it.
	Exec string
	// Args are Exec's arguments (Linux).
	Args []string
}
