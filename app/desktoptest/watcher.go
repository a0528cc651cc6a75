package desktoptest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"
)

// The StatusNotifierItem protocol and its menu, as KDE and Canonical named
// them.
const (
	WatcherName   = "org.kde.StatusNotifierWatcher"
	WatcherPath   = dbus.ObjectPath("/StatusNotifierWatcher")
	ItemInterface = "org.kde.StatusNotifierItem"
	MenuInterface = "com.canonical.dbusmenu"

	// defaultItemPath is where an item registered by bus name lives.
	defaultItemPath = dbus.ObjectPath("/StatusNotifierItem")
)

// Watcher is an org.kde.StatusNotifierWatcher on a test's bus and the
// panel behind it: tray icons register with it, and for each it hands the
// test an Item to read and click. It is safe for concurrent use.
type Watcher struct {
	conn *dbus.Conn
	// host is the connection the panel reads and clicks menus from: conn
	// itself (xfce4-panel, GNOME Shell), or another one (KDE Plasma,
	// where kded owns the watcher and plasmashell shows the menus).
	host    *dbus.Conn
	props   *prop.Properties
	signals chan *dbus.Signal

	mu      sync.Mutex
	items   []*Item
	ignored []*dbus.Signal
	changes notifier
}

// Item is one registered tray icon, seen from the panel. Its methods read
// the icon's properties and menu over D-Bus and click the menu's entries.
type Item struct {
	w *Watcher
	// Service is the unique name of the connection that registered the
	// item: its methods are called there, and only that connection's
	// signals count as the item's.
	Service string
	// Path is the item's object path (fyne.io/systray: /StatusNotifierItem).
	Path dbus.ObjectPath
	// PID is the process behind Service, as the bus daemon knows it.
	PID int
	// Registered is what the item passed to RegisterStatusNotifierItem: a
	// bus name, or an object path on the caller's connection (fyne.io/systray).
	Registered string

	// Guarded by w.mu.
	updates  int             // menu signals received from Service
	gone     bool            // Service left the bus
	menuPath dbus.ObjectPath // from the Menu property, once read
}

// WatcherOptions configures StartWatcherWith.
type WatcherOptions struct {
	// SeparateHost makes the panel that reads and clicks the menus a
	// connection of its own, apart from the watcher's, as on KDE Plasma
	// (kded owns the watcher, plasmashell shows the menus). By default
	// one connection is both, as in xfce4-panel's status tray and GNOME
	// Shell's AppIndicator extension.
	SeparateHost bool
}

// StartWatcher connects to the bus at addr and owns
// org.kde.StatusNotifierWatcher there (failing the test if someone else
// does), with a host registered: IsStatusNotifierHostRegistered is true,
// so an item shows itself. The same connection is the host that reads
// and clicks the items' menus. It stops when the test ends.
func StartWatcher(t testing.TB, addr string) *Watcher {
	t.Helper()
	return StartWatcherWith(t, addr, WatcherOptions{})
}

// StartWatcherWith is StartWatcher with options.
func StartWatcherWith(t testing.TB, addr string, opts WatcherOptions) *Watcher {
	t.Helper()
	w := &Watcher{conn: Connect(t, addr), signals: make(chan *dbus.Signal, 64)}
	w.host = w.conn
	if opts.SeparateHost {
		w.host = Connect(t, addr)
	}
	w.conn.Signal(w.signals)
	rule := "type='signal',sender='" + busDriver + "',interface='" + busDriver + "',member='NameOwnerChanged'"
	if err := busCall(w.conn, "AddMatch", rule).Err; err != nil {
		t.Fatalf("desktop: follow names on the bus: %v", err)
	}
	if err := w.conn.Export(watcherObject{w}, WatcherPath, WatcherName); err != nil {
		t.Fatalf("desktop: export the watcher: %v", err)
	}
	props, err := prop.Export(w.conn, WatcherPath, prop.Map{WatcherName: {
		// Announced by setRegistered, which tolerates a closed connection.
		"RegisteredStatusNotifierItems":  {Value: []string{}, Emit: prop.EmitFalse},
		"IsStatusNotifierHostRegistered": {Value: true, Emit: prop.EmitTrue},
		"ProtocolVersion":                {Value: int32(0), Emit: prop.EmitTrue},
	}})
	if err != nil {
		t.Fatalf("desktop: export the watcher's properties: %v", err)
	}
	w.props = props
	go w.loop()
	own(t, w.conn, WatcherName)
	return w
}

// UniqueName returns the unique name of the watcher's connection, the
// owner of org.kde.StatusNotifierWatcher.
func (w *Watcher) UniqueName() string { return UniqueName(w.conn) }

// HostName returns the unique name of the connection the items' methods
// are called from: the watcher's own unless SeparateHost.
func (w *Watcher) HostName() string { return UniqueName(w.host) }

// WaitItem waits until the process pid has registered an item from one of
// its connections and returns it; pid 0 takes the first item of anyone.
func (w *Watcher) WaitItem(t testing.TB, pid int) *Item {
	t.Helper()
	var found *Item
	w.wait(t, fmt.Sprintf("a tray item registered by process %d", pid), func() bool {
		for _, it := range w.items {
			if pid == 0 || it.PID == pid {
				found = it
				return true
			}
		}
		return false
	})
	return found
}

// WaitIgnored waits until a signal named name (interface.Member) from
// sender has been ignored.
func (w *Watcher) WaitIgnored(t testing.TB, sender, name string) {
	t.Helper()
	w.wait(t, fmt.Sprintf("an ignored %s from %s", name, sender), func() bool {
		return slices.ContainsFunc(w.ignored, func(s *dbus.Signal) bool { return s.Sender == sender && s.Name == name })
	})
}

// wait waits until cond, called with w.mu held, holds.
func (w *Watcher) wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	for {
		w.mu.Lock()
		ok, changed := cond(), w.changes.wait()
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("desktop: no %s within %s", what, Timeout)
		}
	}
}

// loop sorts the signals the watcher's connection receives until it
// closes: an item's own count as its updates, the bus's tell which items
// left, and the rest are ignored.
func (w *Watcher) loop() {
	for sig := range w.signals {
		var left []*Item
		w.mu.Lock()
		switch {
		case sig.Sender == busDriver:
			var name, old, owner string
			if sig.Name == busDriver+".NameOwnerChanged" && dbus.Store(sig.Body, &name, &old, &owner) == nil && owner == "" {
				for _, it := range w.items {
					if it.Service == name && !it.gone {
						it.gone = true
						left = append(left, it)
					}
				}
			}
		case w.itemOf(sig.Sender) != nil:
			if strings.HasPrefix(sig.Name, MenuInterface+".") {
				w.itemOf(sig.Sender).updates++
			}
		default:
			w.ignored = append(w.ignored, sig)
		}
		w.changes.changed()
		if len(left) > 0 {
			w.setRegistered()
		}
		w.mu.Unlock()
		for _, it := range left {
			_ = w.conn.Emit(WatcherPath, WatcherName+".StatusNotifierItemUnregistered", it.Service+string(it.Path))
		}
	}
}

// itemOf returns the live item registered by the connection sender, or
// nil. w.mu is held.
func (w *Watcher) itemOf(sender string) *Item {
	for _, it := range w.items {
		if it.Service == sender && !it.gone {
			return it
		}
	}
	return nil
}

// setRegistered sets RegisteredStatusNotifierItems and announces it
// (PropertiesChanged); at the test's end the connection may be closing,
// and the announcement is then dropped. w.mu is held.
func (w *Watcher) setRegistered() {
	list := w.registered()
	w.props.SetMust(WatcherName, "RegisteredStatusNotifierItems", list)
	_ = w.conn.Emit(WatcherPath, "org.freedesktop.DBus.Properties.PropertiesChanged", WatcherName,
		map[string]dbus.Variant{"RegisteredStatusNotifierItems": dbus.MakeVariant(list)}, []string{})
}

// registered is the RegisteredStatusNotifierItems property: "service/path"
// of each live item. w.mu is held.
func (w *Watcher) registered() []string {
	list := []string{}
	for _, it := range w.items {
		if !it.gone {
			list = append(list, it.Service+string(it.Path))
		}
	}
	return list
}

// watcherObject is the watcher's D-Bus object: its exported methods are
// org.kde.StatusNotifierWatcher's.
type watcherObject struct{ w *Watcher }

// RegisterStatusNotifierItem records the caller's item. service is a bus
// name (the item is at /StatusNotifierItem of its owner) or an object path
// on the caller's connection, which is what fyne.io/systray sends.
func (o watcherObject) RegisterStatusNotifierItem(sender dbus.Sender, service string) *dbus.Error {
	w := o.w
	it := &Item{w: w, Service: string(sender), Path: defaultItemPath, Registered: service}
	switch {
	case strings.HasPrefix(service, "/"):
		it.Path = dbus.ObjectPath(service)
	case service != "":
		if err := busCall(w.conn, "GetNameOwner", service).Store(&it.Service); err != nil {
			return dbus.MakeFailedError(fmt.Errorf("register %s: %w", service, err))
		}
	}
	var pid uint32
	if err := busCall(w.conn, "GetConnectionUnixProcessID", it.Service).Store(&pid); err != nil {
		return dbus.MakeFailedError(fmt.Errorf("register %s: the process of %s: %w", service, it.Service, err))
	}
	it.PID = int(pid)
	if err := busCall(w.conn, "AddMatch", "type='signal',sender='"+it.Service+"'").Err; err != nil {
		return dbus.MakeFailedError(fmt.Errorf("register %s: follow its signals: %w", service, err))
	}
	w.mu.Lock()
	again := slices.ContainsFunc(w.items, func(old *Item) bool { return old.Service == it.Service && old.Path == it.Path && !old.gone })
	if !again {
		w.items = append(w.items, it)
		w.setRegistered()
		w.changes.changed()
	}
	w.mu.Unlock()
	if !again {
		_ = w.conn.Emit(WatcherPath, WatcherName+".StatusNotifierItemRegistered", it.Service+string(it.Path))
	}
	return nil
}

// RegisterStatusNotifierHost accepts any host: the watcher counts itself
// as one already.
func (o watcherObject) RegisterStatusNotifierHost(service string) *dbus.Error { return nil }

// Pixmap is an icon image as StatusNotifierItem sends it: ARGB32 in
// network byte order, row by row.
type Pixmap struct {
	Width, Height int32
	ARGB          []byte
}

// ToolTip is an item's tooltip.
type ToolTip struct {
	IconName string
	Icons    []Pixmap
	Title    string
	Text     string
}

// ItemProperties are an item's org.kde.StatusNotifierItem properties.
type ItemProperties struct {
	ID, Title, Status, Category string
	IconName                    string
	IconPixmap                  []Pixmap
	ToolTip                     ToolTip
	Menu                        dbus.ObjectPath
	ItemIsMenu                  bool
	// All holds every property as sent, the ones above included.
	All map[string]dbus.Variant
}

// Properties reads the item's properties (Properties.GetAll).
func (it *Item) Properties(t testing.TB) ItemProperties {
	t.Helper()
	var all map[string]dbus.Variant
	if err := call(it.w.host, it.Service, it.Path, "org.freedesktop.DBus.Properties.GetAll", ItemInterface).Store(&all); err != nil {
		t.Fatalf("desktop: read the properties of the tray item %s%s: %v", it.Service, it.Path, err)
	}
	p := ItemProperties{All: all}
	for name, dst := range map[string]any{
		"Id": &p.ID, "Title": &p.Title, "Status": &p.Status, "Category": &p.Category, "IconName": &p.IconName,
		"IconPixmap": &p.IconPixmap, "ToolTip": &p.ToolTip, "Menu": &p.Menu, "ItemIsMenu": &p.ItemIsMenu,
	} {
		if v, ok := all[name]; ok {
			if err := dbus.Store([]any{v.Value()}, dst); err != nil {
				t.Fatalf("desktop: the tray item's property %s (%s): %v", name, v.Signature(), err)
			}
		}
	}
	return p
}

// MenuPath returns the object path of the item's com.canonical.dbusmenu
// menu, from its Menu property.
func (it *Item) MenuPath(t testing.TB) dbus.ObjectPath {
	t.Helper()
	it.w.mu.Lock()
	p := it.menuPath
	it.w.mu.Unlock()
	if p != "" {
		return p
	}
	p = it.Properties(t).Menu
	if p == "" || p == "/" {
		t.Fatalf("desktop: the tray item %s%s has no menu (Menu property %q)", it.Service, it.Path, p)
	}
	it.w.mu.Lock()
	it.menuPath = p
	it.w.mu.Unlock()
	return p
}

// Layout reads the whole menu once: GetLayout(0, -1, all properties). A
// fyne.io/systray item answers its first GetLayout with the top level
// only; WaitMenu is what a test usually wants.
func (it *Item) Layout(t testing.TB) Menu {
	t.Helper()
	var rev uint32
	var root rawLayout
	if err := call(it.w.host, it.Service, it.MenuPath(t), MenuInterface+".GetLayout", int32(0), int32(-1), []string{}).Store(&rev, &root); err != nil {
		t.Fatalf("desktop: read the menu of the tray item %s: %v", it.Service, err)
	}
	node, err := root.node()
	if err != nil {
		t.Fatalf("desktop: the menu of the tray item %s: %v", it.Service, err)
	}
	return Menu{Revision: rev, Root: node}
}

// WaitMenu reads the menu until cond holds for it, and returns it. It
// reads again after each LayoutUpdated or ItemsPropertiesUpdated the item
// emits, and fails the test (showing the last menu read) when the item
// leaves the bus or after Timeout.
func (it *Item) WaitMenu(t testing.TB, what string, cond func(Menu) bool) Menu {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	for {
		it.w.mu.Lock()
		changed, gone := it.w.changes.wait(), it.gone
		it.w.mu.Unlock()
		if gone {
			t.Fatalf("desktop: the tray item %s left the bus before its menu showed %s", it.Service, what)
		}
		m := it.Layout(t)
		if cond(m) {
			return m
		}
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("desktop: the tray menu did not show %s within %s; it is:\n%s", what, Timeout, m)
		}
	}
}

// Updates returns how many com.canonical.dbusmenu signals (LayoutUpdated,
// ItemsPropertiesUpdated, …) the item has sent.
func (it *Item) Updates() int {
	it.w.mu.Lock()
	defer it.w.mu.Unlock()
	return it.updates
}

// Click clicks the menu entry id, as a panel does when a person picks it:
// Event(id, "clicked", 0, 0).
func (it *Item) Click(t testing.TB, id int32) {
	t.Helper()
	it.Event(t, id, "clicked")
}

// Event sends the menu event eventID ("clicked", "opened", "closed",
// "hovered") for entry id.
func (it *Item) Event(t testing.TB, id int32, eventID string) {
	t.Helper()
	if err := call(it.w.host, it.Service, it.MenuPath(t), MenuInterface+".Event", id, eventID, dbus.MakeVariant(int32(0)), uint32(0)).Err; err != nil {
		t.Fatalf("desktop: send %q to menu entry %d of %s: %v", eventID, id, it.Service, err)
	}
}

// AboutToShow tells the item that entry id's submenu is about to open and
// returns whether the item says its layout needs reading again.
func (it *Item) AboutToShow(t testing.TB, id int32) bool {
	t.Helper()
	var update bool
	if err := call(it.w.host, it.Service, it.MenuPath(t), MenuInterface+".AboutToShow", id).Store(&update); err != nil {
		t.Fatalf("desktop: AboutToShow(%d) on %s: %v", id, it.Service, err)
	}
	return update
}

// WaitGone waits until the item's connection has left the bus.
func (it *Item) WaitGone(t testing.TB) {
	t.Helper()
	it.w.wait(t, "departure of the tray item "+it.Service, func() bool { return it.gone })
}

// rawLayout is a dbusmenu layout as sent: (ia{sv}av).
type rawLayout struct {
	ID       int32
	Props    map[string]dbus.Variant
	Children []dbus.Variant
}

// node converts the layout, children included.
func (r rawLayout) node() (*MenuNode, error) {
	n := &MenuNode{ID: r.ID, Type: "standard", Enabled: true, Visible: true, ToggleState: -1, Props: r.Props}
	for name, dst := range map[string]any{
		"label": &n.Label, "type": &n.Type, "enabled": &n.Enabled, "visible": &n.Visible,
		"toggle-type": &n.ToggleType, "toggle-state": &n.ToggleState, "children-display": &n.ChildrenDisplay,
	} {
		if v, ok := r.Props[name]; ok {
			if err := dbus.Store([]any{v.Value()}, dst); err != nil {
				return nil, fmt.Errorf("entry %d: property %s (%s): %w", r.ID, name, v.Signature(), err)
			}
		}
	}
	for _, c := range r.Children {
		var raw rawLayout
		if err := dbus.Store([]any{c.Value()}, &raw); err != nil {
			return nil, fmt.Errorf("entry %d: a child (%s): %w", r.ID, c.Signature(), err)
		}
		child, err := raw.node()
		if err != nil {
			return nil, err
		}
		n.Children = append(n.Children, child)
	}
	return n, nil
}

// Menu is a tray menu as GetLayout returned it.
type Menu struct {
	Revision uint32
	Root     *MenuNode // id 0; its children are the menu's top level
}

// MenuNode is one menu entry, with the dbusmenu specification's defaults
// for properties the item did not send.
type MenuNode struct {
	ID int32
	// Label is the text, as sent (an underscore marks an access key).
	Label string
	// Type is "standard" or "separator".
	Type             string
	Enabled, Visible bool
	// ToggleType is "checkmark", "radio" or "" (none); ToggleState is 1
	// (on), 0 (off) or -1 (indeterminate, or not sent).
	ToggleType  string
	ToggleState int32
	// ChildrenDisplay is "submenu" for an entry that opens one.
	ChildrenDisplay string
	// Props holds every property as sent.
	Props    map[string]dbus.Variant
	Children []*MenuNode
}

// Checked reports whether a checkbox or radio entry is on.
func (n *MenuNode) Checked() bool { return n.ToggleType != "" && n.ToggleState == 1 }

// Labels returns the labels of n's children, in order.
func (n *MenuNode) Labels() []string {
	var l []string
	for _, c := range n.Children {
		l = append(l, c.Label)
	}
	return l
}

// Find returns the entry reached from the top level by following labels
// (exact matches), or nil.
func (m Menu) Find(labels ...string) *MenuNode {
	n := m.Root
	for _, l := range labels {
		if n == nil {
			return nil
		}
		i := slices.IndexFunc(n.Children, func(c *MenuNode) bool { return c.Label == l })
		if i < 0 {
			return nil
		}
		n = n.Children[i]
	}
	return n
}

// FindFunc returns the first entry, depth first, for which f is true, or
// nil.
func (m Menu) FindFunc(f func(*MenuNode) bool) *MenuNode {
	var walk func(*MenuNode) *MenuNode
	walk = func(n *MenuNode) *MenuNode {
		if n == nil {
			return nil
		}
		if n != m.Root && f(n) {
			return n
		}
		for _, c := range n.Children {
			if found := walk(c); found != nil {
				return found
			}
		}
		return nil
	}
	return walk(m.Root)
}

// String draws the menu, one entry a line, for failure messages.
func (m Menu) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "revision %d\n", m.Revision)
	var draw func(n *MenuNode, depth int)
	draw = func(n *MenuNode, depth int) {
		for _, c := range n.Children {
			fmt.Fprintf(&b, "%s%d %q", strings.Repeat("  ", depth), c.ID, c.Label)
			if c.Type != "standard" {
				fmt.Fprintf(&b, " [%s]", c.Type)
			}
			if !c.Enabled {
				b.WriteString(" [disabled]")
			}
			if !c.Visible {
				b.WriteString(" [hidden]")
			}
			if c.ToggleType != "" {
				fmt.Fprintf(&b, " [%s %d]", c.ToggleType, c.ToggleState)
			}
			if c.ChildrenDisplay != "" {
				fmt.Fprintf(&b, " [%s]", c.ChildrenDisplay)
			}
			b.WriteByte('\n')
			draw(c, depth+1)
		}
	}
	if m.Root != nil {
		draw(m.Root, 0)
	}
	return b.String()
}

// MenuEvent sends the menu event eventID ("clicked", …) for entry id to
// the com.canonical.dbusmenu menu at path of the connection service, as a
// panel would: a click that no panel made. It returns the menu's answer.
func (f *Forger) MenuEvent(t testing.TB, service string, path dbus.ObjectPath, id int32, eventID string) error {
	t.Helper()
	return call(f.conn, service, path, MenuInterface+".Event", id, eventID, dbus.MakeVariant(int32(0)), uint32(0)).Err
}

// MenuEventGroup sends several menu events at once (EventGroup), each
// eventID for its entry, and returns the menu's answer.
func (f *Forger) MenuEventGroup(t testing.TB, service string, path dbus.ObjectPath, eventID string, ids ...int32) error {
	t.Helper()
	events := make([]struct {
		V0 int32
		V1 string
		V2 dbus.Variant
		V3 uint32
	}, len(ids))
	for i, id := range ids {
		events[i].V0, events[i].V1, events[i].V2 = id, eventID, dbus.MakeVariant(int32(0))
	}
	var idErrors []int32
	return call(f.conn, service, path, MenuInterface+".EventGroup", events).Store(&idErrors)
}
