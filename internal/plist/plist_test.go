package plist

import (
	"fmt"
	"testing"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	const head = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">`
	good := head + `<!-- a comment -->
<dict>
	<key>S</key><string>a &amp; b</string>
	<key>I</key><integer>10</integer>
	<key>T</key><true/>
	<key>F</key><false/>
	<key>A</key><array><string>x</string><dict><key>K</key><false/></dict></array>
</dict>
</plist>`
	got, err := Decode([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"S": "a & b", "I": "10", "T": true, "F": false,
		"A": []any{"x", map[string]any{"K": false}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Decode = %v, want %v", got, want)
	}

	for name, bad := range map[string]string{
		"no dict":         head + `</plist>`,
		"two dicts":       head + `<dict></dict><dict></dict></plist>`,
		"repeated key":    head + `<dict><key>a</key><true/><key>a</key><true/></dict></plist>`,
		"key, no value":   head + `<dict><key>a</key></dict></plist>`,
		"value, no key":   head + `<dict><true/></dict></plist>`,
		"unsupported":     head + `<dict><key>a</key><real>1.5</real></dict></plist>`,
		"not well formed": head + `<dict><key>a</key><string>x</dict></plist>`,
		"binary":          "bplist00\x00",
	} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
