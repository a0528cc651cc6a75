package tray

import (
	"sync"

	"github.com/carapace-dev/carapace/app/menu"
)

// reconcileView is the view of a platform whose menu library shows the
// items (fyne systray's menu on macOS): a reconciler keeps the backend's
// menu equal to the items, and a click on the backend's item reports the
// action of the item with its ID as last applied.
type reconcileView struct {
	t *Tray
	// vouched says the backend's menu can be clicked only through the
	// desktop's own menu (macOS: it is drawn by the app's process).
	vouched bool

	mu  sync.Mutex // show against clicks
	rec reconciler
}

func (v *reconcileView) show(items []menu.Item) {
	v.mu.Lock()
	defer v.mu.Unlock()
	before := v.rec.rebuilds
	v.rec.apply(items)
	if v.rec.rebuilds != before {
		v.t.log.Debug("tray: the menu was rebuilt")
	}
}

// clicked reports a click on the item with id, if it is shown and
// enabled.
func (v *reconcileView) clicked(id string) {
	v.mu.Lock()
	a, enabled := v.rec.action(id)
	v.mu.Unlock()
	if enabled {
		v.t.deliver(menu.Click{Action: a, Vouched: v.vouched})
	}
}

// backend is what the reconciler needs from a menu-bar library. It has
// the shape of fyne.io/systray's menu: items are appended to the end of
// their parent (there is no insert), an item can be removed with its
// submenu, a separator can be added but neither changed nor removed, and
// the whole menu can be reset. Whether an item is a check box is fixed
// when it is added.
type backend interface {
	// add appends it (its own fields, not its children) to parent's
	// submenu (nil: the top level) and returns its handle; clicks on it
	// are reported with it.ID.
	add(parent handle, it menu.Item) handle
	// addSeparator appends a separator to parent's submenu.
	addSeparator(parent handle)
	// update changes h's title, tooltip, enabled and checked state to it's.
	update(h handle, it menu.Item)
	// remove removes h and its submenu.
	remove(h handle)
	// reset removes everything.
	reset()
}

// handle is a backend's item.
type handle any

// node is one item as the backend shows it.
type node struct {
	id       string
	h        handle // nil for a separator
	sep      bool
	props    props // as last applied
	children []*node
	// submenu says the item was added with children: it stays a submenu.
	submenu bool
}

// props are what the backend shows of an item itself, and its action.
type props struct {
	Title, Tooltip              string
	Enabled, Checkable, Checked bool
	Action                      menu.Action
}

func propsOf(it menu.Item) props {
	return props{Title: it.Title, Tooltip: it.Tooltip, Enabled: it.Enabled, Checkable: it.Checkable, Checked: it.Checked, Action: it.Action}
}

// item is the backend's view of p for an item with id.
func (p props) item(id string) menu.Item {
	return menu.Item{ID: id, Title: p.Title, Tooltip: p.Tooltip, Enabled: p.Enabled, Checkable: p.Checkable, Checked: p.Checked, Action: p.Action}
}

// reconciler keeps a backend's menu equal to the last Tree it was given,
// changing items in place where it can: an item keeps its backend handle
// for as long as its ID is shown at the same place among its siblings.
// Items that disappear are removed; items that appear after all those
// kept are appended. A change the backend cannot make in place — an item
// inserted before one kept, a separator that goes, a check box that
// appears, an item that gains or loses its submenu — rebuilds the menu.
type reconciler struct {
	b     backend
	root  node
	built bool
	// rebuilds counts full rebuilds, for tests and logs.
	rebuilds int
}

// apply makes the backend show items.
func (r *reconciler) apply(items []menu.Item) {
	if r.built && r.canSync(&r.root, items) {
		r.sync(&r.root, items)
		return
	}
	if r.built {
		r.b.reset()
		r.rebuilds++
	}
	r.root = node{}
	r.built = true
	for _, it := range items {
		r.root.children = append(r.root.children, r.build(nil, it))
	}
}

// build adds it and its children under parent.
func (r *reconciler) build(parent handle, it menu.Item) *node {
	if it.Separator {
		r.b.addSeparator(parent)
		return &node{id: it.ID, sep: true}
	}
	n := &node{id: it.ID, props: propsOf(it), submenu: len(it.Children) > 0}
	n.h = r.b.add(parent, n.props.item(it.ID))
	for _, c := range it.Children {
		n.children = append(n.children, r.build(n.h, c))
	}
	return n
}

// canSync reports whether n's children can be brought to want in place:
// the children kept (those whose IDs want has) come first in want, in
// the same order and of the same kind, no separator goes, and the same
// holds below each kept child.
func (r *reconciler) canSync(n *node, want []menu.Item) bool {
	wanted := make(map[string]bool, len(want))
	for _, it := range want {
		if wanted[it.ID] {
			return false // repeated IDs: never in place
		}
		wanted[it.ID] = true
	}
	i := 0
	for _, c := range n.children {
		if !wanted[c.id] {
			if c.sep {
				return false
			}
			continue
		}
		if i >= len(want) {
			return false
		}
		it := want[i]
		if c.id != it.ID || c.sep != it.Separator {
			return false
		}
		if !c.sep && (c.props.Checkable != it.Checkable || c.submenu != (len(it.Children) > 0) || !r.canSync(c, it.Children)) {
			return false
		}
		i++
	}
	return true
}

// sync brings n's children to want in place; canSync(n, want) must hold.
func (r *reconciler) sync(n *node, want []menu.Item) {
	wanted := make(map[string]bool, len(want))
	for _, it := range want {
		wanted[it.ID] = true
	}
	keep := n.children[:0:0]
	for _, c := range n.children {
		if wanted[c.id] {
			keep = append(keep, c)
		} else {
			r.b.remove(c.h)
		}
	}
	for i, c := range keep {
		if c.sep {
			continue
		}
		if p := propsOf(want[i]); p != c.props {
			r.b.update(c.h, p.item(c.id))
			c.props = p
		}
		r.sync(c, want[i].Children)
	}
	n.children = keep
	for _, it := range want[len(keep):] {
		n.children = append(n.children, r.build(n.h, it))
	}
}

// action returns the action of the item with id as last applied, and
// whether it is enabled.
func (r *reconciler) action(id string) (menu.Action, bool) {
	if n := find(r.root.children, id); n != nil {
		return n.props.Action, n.props.Enabled
	}
	return menu.Action{}, false
}

func find(ns []*node, id string) *node {
	for _, c := range ns {
		if c.id == id && !c.sep {
			return c
		}
		if n := find(c.children, id); n != nil {
			return n
		}
	}
	return nil
}
