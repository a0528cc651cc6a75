package applecontainer

import (
	"errors"
	"testing"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		out, want string
	}{
		// ReleaseVersion.singleLine since 0.6.0.
		{"container CLI version 1.2.2 (build: release, commit: 0190097)\n", "1.2.2"},
		{"container CLI version 1.1.0 (build: debug, commit: unspecified)\n", "1.1.0"},
		// 0.1.0 added the SDK.
		{"container CLI version 0.1.0 (build: release, commit: 4f2c3d1, sdk: MacOS 15)\n", "0.1.0"},
		// A version that is no release yet.
		{"container CLI version 1.3.0-rc.1 (build: release, commit: abc1234)\n", "1.3.0-rc.1"},
		// Other plausible forms.
		{"container version 1.2.2\n", "1.2.2"},
		{"container CLI version: v1.2.1\n", "1.2.1"},
		{"Version 1.2\n", "1.2.0"},
		{"1.2.2\n", "1.2.2"},
		{"v1.2.2\n", "1.2.2"},
		{"\n  1.0.0  \n", "1.0.0"},
		// A debug build's warning, should it reach stdout, comes first.
		{"Warning! Running debug build. Performance may be degraded.\ncontainer CLI version 1.2.2 (build: debug, commit: 0190097)\n", "1.2.2"},
	}
	for _, tt := range tests {
		t.Run(tt.out, func(t *testing.T) {
			v, err := parseVersion(tt.out)
			if err != nil {
				t.Fatal(err)
			}
			if v.String() != tt.want {
				t.Errorf("version %s, want %s", v, tt.want)
			}
		})
	}
}

func TestParseVersionRefuses(t *testing.T) {
	for _, out := range []string{
		"",
		"container CLI (build: release, commit: 0190097)\n",
		"OVERVIEW: A container platform for macOS\n",
		"commit 1.2.2.3.4 (build: release)\n",
	} {
		t.Run(out, func(t *testing.T) {
			if v, err := parseVersion(out); !errors.Is(err, errNoVersion) {
				t.Errorf("parseVersion = %v, %v; want errNoVersion", v, err)
			}
		})
	}
}

func TestParseSystemVersion(t *testing.T) {
	tests := []struct {
		out, want string
		err       bool
	}{
		{`[{"appName":"container","buildType":"release","commit":"0190097d06df0b9065f4c2d2c7873c649d81d493","version":"1.2.2"},` +
			`{"appName":"container-apiserver","buildType":"release","commit":"ee848e3ebfd7c73b04dd419683be54fb450b8779","version":"1.0.0"}]`, "1.2.2", false},
		// Before 1.0.0 keys were not sorted.
		{`[{"version":"0.12.3","buildType":"release","commit":"f9899013fd43dd058fdf89709eed0b0861bfd931","appName":"container"}]`, "0.12.3", false},
		{`[{"appName":"container-apiserver","version":"1.2.2"}]`, "", true},
		{`COMPONENT VERSION BUILD COMMIT`, "", true},
	}
	for _, tt := range tests {
		v, err := parseSystemVersion([]byte(tt.out))
		if (err != nil) != tt.err {
			t.Errorf("%s: err = %v", tt.out, err)
			continue
		}
		if err == nil && v.String() != tt.want {
			t.Errorf("%s: version %s, want %s", tt.out, v, tt.want)
		}
	}
}
