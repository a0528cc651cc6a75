package telegram

import (
	"encoding/json"
	"testing"
)

// TestSendIsEgress: send_telegram sends data out of the machine, so its
// manifest says so, and the core's taint rule asks before a tainted
// session sends (docs/SECURITY.md, "Provenance and taint"). The channel's
// inbound messages are the owner's own words: nothing here is untrusted
// output.
func TestSendIsEgress(t *testing.T) {
	var m struct {
		Provides struct {
			Tools []struct {
				Name            string `json:"name"`
				Egress          bool   `json:"egress"`
				UntrustedOutput bool   `json:"untrusted_output"`
			} `json:"tools"`
		} `json:"provides"`
	}
	if err := json.Unmarshal(Manifest(), &m); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range m.Provides.Tools {
		if tl.UntrustedOutput {
			t.Errorf("%s declares untrusted output", tl.Name)
		}
		if tl.Name == "send_telegram" {
			found = true
			if !tl.Egress {
				t.Error("send_telegram is not declared egress")
			}
		}
	}
	if !found {
		t.Fatal("no send_telegram in the manifest")
	}
}
