//go:build linux

package tray

// The menu on Linux: a com.canonical.dbusmenu object of the Tray's own.
//
// fyne.io/systray serves the StatusNotifierItem (icon, title, tooltip,
// registration with the watcher) and, at /StatusNotifierItem/menu on the
// same connection, a dbusmenu menu whose Event takes a click from any
// connection on the session bus: any program that can reach the bus — a
// sandboxed one with no access to the control socket, say — could click
// Approve. fyne offers no hook into its menu, so the Tray serves the menu
// itself, on fyne's connection (the process's shared session bus, which
// fyne uses) and at fyne's path: godbus's Export replaces the methods of
// an interface on a path. Its methods read the menu.Tree last shown, and
// its Event learns who sent it (a dbus.Sender argument).
//
// Who may click. The bus daemon stamps each call with its sender's unique
// name, but nothing on the bus says which connection is the panel: the
// StatusNotifierItem protocol publishes no list of hosts, and the names
// hosts own (org.kde.StatusNotifierHost-PID) any connection may own. The
// one name the item relies on is org.kde.StatusNotifierWatcher: it
// registers with that name's owner, as the notifier trusts the owner of
// org.freedesktop.Notifications. So a click is vouched for
// (menu.Click.Vouched) when its sender owns the watcher's name now. That
// holds where one connection is both watcher and host: xfce4-panel's
// status tray (its systray plugin process; seen here with 4.18) and, by
// their design, GNOME Shell's AppIndicator extension and LXQt's panel. It
// does not where they are apart — KDE Plasma: kded is the watcher,
// plasmashell shows the menus — nor for any other program: their clicks
// are delivered unvouched, and the app approves nothing on them (it asks
// again where only the user can answer, app.Run says how).

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"

	"github.com/carapace-dev/carapace/app/menu"
)

const (
	// menuPath is where fyne systray's item says its menu is (its Menu
	// property).
	menuPath      = dbus.ObjectPath("/StatusNotifierItem/menu")
	menuInterface = "com.canonical.dbusmenu"
	// menuProtocol is the dbusmenu version served (its Version property).
	menuProtocol = uint32(3)

	watcherName = "org.kde.StatusNotifierWatcher"
	busDriver   = "org.freedesktop.DBus"

	// ownerTimeout bounds the question to the bus who owns the watcher.
	ownerTimeout = 5 * time.Second
	// firstLayoutRefresh is how long after the first, shallow layout the
	// whole one is announced (see GetLayout).
	firstLayoutRefresh = 150 * time.Millisecond
)

// Log messages; tests look for some of them.
const (
	msgUnvouched = "tray: a menu click not proven to come from the panel"
)

// layout is a dbusmenu layout: (ia{sv}av), an entry's id, properties and
// children (each a layout in a variant).
type layout = struct {
	V0 int32
	V1 map[string]dbus.Variant
	V2 []dbus.Variant
}

// entry is one menu entry as served.
type entry struct {
	id       int32
	item     menu.Item // its own fields; Children are in children
	props    map[string]dbus.Variant
	children []*entry
}

// dbusMenu is the Tray's dbusmenu menu: the items last shown, with ids
// that stay the same for an item ID as long as it is shown.
type dbusMenu struct {
	log     *slog.Logger
	deliver func(menu.Click)

	mu          sync.Mutex
	conn        *dbus.Conn // nil until attached
	rev         uint32
	ids         map[string]int32 // item ID → entry id, for the items shown
	next        int32            // the last id given; ids are never reused
	byID        map[int32]*entry
	root        *entry
	shallowDone bool // the first GetLayout was answered
}

var _ view = (*dbusMenu)(nil)

func newDBusMenu(log *slog.Logger, deliver func(menu.Click)) *dbusMenu {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	root := &entry{id: 0, props: map[string]dbus.Variant{"children-display": dbus.MakeVariant("submenu")}}
	return &dbusMenu{log: log, deliver: deliver, rev: 1, ids: map[string]int32{}, byID: map[int32]*entry{0: root}, root: root}
}

// show implements view: items become the menu, announced with
// LayoutUpdated once attached.
func (m *dbusMenu) show(items []menu.Item) {
	m.mu.Lock()
	ids := make(map[string]int32, len(m.ids))
	byID := map[int32]*entry{}
	root := &entry{id: 0, props: map[string]dbus.Variant{"children-display": dbus.MakeVariant("submenu")}}
	byID[0] = root
	root.children = m.entries(items, ids, byID)
	m.ids, m.byID, m.root = ids, byID, root
	m.rev++
	conn, rev := m.conn, m.rev
	m.mu.Unlock()
	m.announce(conn, rev)
}

// entries makes the entries of items, each with the id its item ID had,
// or a new one; m.mu is held.
func (m *dbusMenu) entries(items []menu.Item, ids map[string]int32, byID map[int32]*entry) []*entry {
	out := make([]*entry, 0, len(items))
	for _, it := range items {
		id, ok := m.ids[it.ID]
		if _, taken := ids[it.ID]; !ok || taken || it.ID == "" {
			m.next++
			id = m.next
		}
		ids[it.ID] = id
		e := &entry{id: id, props: properties(it)}
		e.item, e.item.Children = it, nil
		byID[id] = e
		e.children = m.entries(it.Children, ids, byID)
		out = append(out, e)
	}
	return out
}

// properties are an item's dbusmenu properties; those left out have the
// specification's defaults (visible, enabled, standard, no toggle).
func properties(it menu.Item) map[string]dbus.Variant {
	if it.Separator {
		return map[string]dbus.Variant{"type": dbus.MakeVariant("separator")}
	}
	p := map[string]dbus.Variant{
		"label":   dbus.MakeVariant(label(it.Title)),
		"enabled": dbus.MakeVariant(it.Enabled),
	}
	if it.Checkable {
		state := int32(0)
		if it.Checked {
			state = 1
		}
		p["toggle-type"], p["toggle-state"] = dbus.MakeVariant("checkmark"), dbus.MakeVariant(state)
	}
	if len(it.Children) > 0 {
		p["children-display"] = dbus.MakeVariant("submenu")
	}
	return p
}

// attach serves the menu on conn, fyne systray's connection, in place of
// fyne's, and announces it.
func (m *dbusMenu) attach(conn *dbus.Conn) error {
	if err := conn.Export(menuObject{m}, menuPath, menuInterface); err != nil {
		return fmt.Errorf("tray: serve the menu: %w", err)
	}
	_, err := prop.Export(conn, menuPath, prop.Map{menuInterface: {
		"Version":       {Value: menuProtocol, Emit: prop.EmitConst},
		"TextDirection": {Value: "ltr", Emit: prop.EmitConst},
		"Status":        {Value: "normal", Emit: prop.EmitConst},
		"IconThemePath": {Value: []string{}, Emit: prop.EmitConst},
	}})
	if err != nil {
		return fmt.Errorf("tray: serve the menu's properties: %w", err)
	}
	m.mu.Lock()
	m.conn = conn
	m.rev++
	rev := m.rev
	m.mu.Unlock()
	m.announce(conn, rev)
	return nil
}

// announce tells the panel the layout changed.
func (m *dbusMenu) announce(conn *dbus.Conn, rev uint32) {
	if conn == nil {
		return
	}
	if err := conn.Emit(menuPath, menuInterface+".LayoutUpdated", rev, int32(0)); err != nil {
		m.log.Warn("tray: announce the menu's layout", "err", err)
	}
}

// click reports a click on entry id sent by sender.
func (m *dbusMenu) click(sender dbus.Sender, id int32) {
	m.mu.Lock()
	e, conn := m.byID[id], m.conn
	m.mu.Unlock()
	if e == nil || !e.item.Enabled || e.item.Action.Kind == menu.ActionNone {
		m.log.Debug("tray: a click on no clickable entry", "entry", id, "from", string(sender))
		return
	}
	panel := m.panel(conn)
	c := menu.Click{Action: e.item.Action, Vouched: panel != "" && string(sender) == panel, From: string(sender)}
	if !c.Vouched {
		level := slog.LevelDebug // only an Approve needs the panel
		if c.Kind == menu.ActionApprove {
			level = slog.LevelInfo
		}
		m.log.Log(context.Background(), level, msgUnvouched, "action", c.Kind.String(), "target", c.Target, "from", c.From, "panel", cmp.Or(panel, "none"))
	}
	m.deliver(c)
}

// panel returns the unique name owning org.kde.StatusNotifierWatcher
// now, or "" when nobody does (or the bus does not answer).
func (m *dbusMenu) panel(conn *dbus.Conn) string {
	if conn == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), ownerTimeout)
	defer cancel()
	var owner string
	if err := conn.BusObject().CallWithContext(ctx, busDriver+".GetNameOwner", 0, watcherName).Store(&owner); err != nil {
		m.log.Debug("tray: who owns the watcher", "err", err)
		return ""
	}
	return owner
}

// menuObject is the menu's D-Bus object: its exported methods are
// com.canonical.dbusmenu's (kept off dbusMenu, whose methods are the
// Tray's).
type menuObject struct{ m *dbusMenu }

// GetLayout is com.canonical.dbusmenu.GetLayout: the entry parentID and
// its children to depth (-1: all).
//
// The first answer goes one level deep and the whole layout is announced
// a moment later, as fyne systray does: libdbusmenu-gtk3 (xfce4-panel,
// Cinnamon) asks for grandchildren before their parents on its first
// read and drops them, leaving submenus blank.
func (o menuObject) GetLayout(parentID, depth int32, names []string) (uint32, layout, *dbus.Error) {
	m := o.m
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byID[parentID]
	if e == nil {
		return 0, layout{}, unknownEntry(parentID)
	}
	if !m.shallowDone {
		m.shallowDone = true
		if depth < 0 || depth > 1 {
			depth = 1
		}
		time.AfterFunc(firstLayoutRefresh, func() {
			m.mu.Lock()
			m.rev++
			conn, rev := m.conn, m.rev
			m.mu.Unlock()
			m.announce(conn, rev)
		})
	}
	return m.rev, e.layout(depth, names), nil
}

// layout is e with its children to depth, with the properties names
// (all when empty).
func (e *entry) layout(depth int32, names []string) layout {
	l := layout{V0: e.id, V1: pick(e.props, names), V2: []dbus.Variant{}}
	if depth == 0 {
		return l
	}
	for _, c := range e.children {
		l.V2 = append(l.V2, dbus.MakeVariant(c.layout(depth-1, names)))
	}
	return l
}

// pick returns the properties names of props; all of them when names is
// empty.
func pick(props map[string]dbus.Variant, names []string) map[string]dbus.Variant {
	out := make(map[string]dbus.Variant, len(props))
	for k, v := range props {
		if len(names) == 0 || slices.Contains(names, k) {
			out[k] = v
		}
	}
	return out
}

// GetGroupProperties is com.canonical.dbusmenu.GetGroupProperties: the
// properties names of the entries ids (every entry when ids is empty).
func (o menuObject) GetGroupProperties(ids []int32, names []string) ([]struct {
	V0 int32
	V1 map[string]dbus.Variant
}, *dbus.Error) {
	m := o.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(ids) == 0 {
		for id := range m.byID {
			ids = append(ids, id)
		}
		slices.Sort(ids)
	}
	out := []struct {
		V0 int32
		V1 map[string]dbus.Variant
	}{}
	for _, id := range ids {
		if e := m.byID[id]; e != nil {
			out = append(out, struct {
				V0 int32
				V1 map[string]dbus.Variant
			}{id, pick(e.props, names)})
		}
	}
	return out, nil
}

// GetProperty is com.canonical.dbusmenu.GetProperty.
func (o menuObject) GetProperty(id int32, name string) (dbus.Variant, *dbus.Error) {
	m := o.m
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byID[id]
	if e == nil {
		return dbus.MakeVariant(""), unknownEntry(id)
	}
	v, ok := e.props[name]
	if !ok {
		return dbus.MakeVariant(""), dbus.MakeFailedError(fmt.Errorf("menu entry %d has no property %q", id, name))
	}
	return v, nil
}

// Event is com.canonical.dbusmenu.Event: a "clicked" is reported with its
// sender; other events change nothing.
func (o menuObject) Event(sender dbus.Sender, id int32, eventID string, _ dbus.Variant, _ uint32) *dbus.Error {
	if eventID == "clicked" {
		o.m.click(sender, id)
	}
	return nil
}

// EventGroup is com.canonical.dbusmenu.EventGroup: Event for each, in
// order; the ids of entries that do not exist are returned.
func (o menuObject) EventGroup(sender dbus.Sender, events []struct {
	V0 int32
	V1 string
	V2 dbus.Variant
	V3 uint32
}) ([]int32, *dbus.Error) {
	idErrors := []int32{}
	for _, ev := range events {
		o.m.mu.Lock()
		_, ok := o.m.byID[ev.V0]
		o.m.mu.Unlock()
		if !ok {
			idErrors = append(idErrors, ev.V0)
			continue
		}
		if ev.V1 == "clicked" {
			o.m.click(sender, ev.V0)
		}
	}
	return idErrors, nil
}

// AboutToShow is com.canonical.dbusmenu.AboutToShow: the layout is
// always current, so no update is needed.
func (o menuObject) AboutToShow(id int32) (bool, *dbus.Error) { return false, nil }

// AboutToShowGroup is com.canonical.dbusmenu.AboutToShowGroup: no update
// is needed; the ids of entries that do not exist are returned.
func (o menuObject) AboutToShowGroup(ids []int32) ([]int32, []int32, *dbus.Error) {
	o.m.mu.Lock()
	defer o.m.mu.Unlock()
	idErrors := []int32{}
	for _, id := range ids {
		if o.m.byID[id] == nil {
			idErrors = append(idErrors, id)
		}
	}
	return []int32{}, idErrors, nil
}

// unknownEntry is the error for an entry id the menu does not have.
func unknownEntry(id int32) *dbus.Error {
	return dbus.MakeFailedError(fmt.Errorf("no menu entry %d", id))
}
