package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"testing"
)

// TestControlChecksTheAddressDialled: the default dialer's Control hook
// lets a socket connect only to an address the point checked for this
// request, whatever the caller asked for; the same dial to a checked
// address connects (the positive control).
func TestControlChecksTheAddressDialled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	target := netip.MustParseAddrPort(ln.Addr().String())
	other := netip.AddrPortFrom(netip.MustParseAddr("93.184.216.34"), target.Port())
	p := &Point{}

	for name, permitted := range map[string]map[netip.AddrPort]bool{
		"nothing checked":         {},
		"another address":         {other: true},
		"the address, other port": {netip.AddrPortFrom(target.Addr(), target.Port()+1): true},
	} {
		c, err := p.dial(context.Background(), target, permitted)
		if err == nil {
			c.Close()
			t.Fatalf("%s: the dial to %s went through", name, target)
		}
		if !errors.Is(err, errNotChecked) {
			t.Fatalf("%s: %v, want the Control hook's refusal", name, err)
		}
	}
	c, err := p.dial(context.Background(), target, map[netip.AddrPort]bool{target: true})
	if err != nil {
		t.Fatalf("the checked address: %v", err)
	}
	c.Close()

	// The hook reads an address in any spelling the same way.
	check := control(map[netip.AddrPort]bool{target: true})
	for addr, ok := range map[string]bool{
		target.String(): true,
		"[::ffff:" + target.Addr().String() + "]:" + itoa(target.Port()): true,
		"127.0.0.2:" + itoa(target.Port()):                               false,
		"localhost:" + itoa(target.Port()):                               false, // a name is never dialled
		"garbage":                                                        false,
	} {
		if err := check("tcp4", addr, nil); (err == nil) != ok {
			t.Errorf("control(%s) = %v, want ok %v", addr, err, ok)
		}
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }
