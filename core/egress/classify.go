package egress

import (
	"net/netip"

	"github.com/carapace-dev/carapace/internal/netclass"
)

// Classify says which special-purpose range a holds, and whether it is
// special at all: internal/netclass.Classify, the one list (the web plugin
// checks URLs by it too). A public address is ("", false).
func Classify(a netip.Addr) (class string, special bool) { return netclass.Classify(a) }
