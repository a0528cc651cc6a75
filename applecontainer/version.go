package applecontainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Versions of Apple's container CLI that matter here.
const (
	// MinVersion is the oldest version Check accepts: the first that gives
	// a host socket mounted with -v the host's permissions inside the VM
	// (apple/container PR #1751).
	MinVersion = "1.1.0"
	// RecommendedVersion is the oldest version Check accepts without a
	// warning: 1.2.0 applies read-only /proc paths that cannot be overridden
	// before 1.2.1, and the socket relay has had fixes since 1.1.0.
	RecommendedVersion = "1.2.1"
)

var (
	minVersion         = semver.MustParse(MinVersion)
	recommendedVersion = semver.MustParse(RecommendedVersion)
)

// ReleasesURL is where Apple's container CLI is downloaded from.
const ReleasesURL = "https://github.com/apple/container/releases"

// The version in `container --version`. The CLI prints
// "container CLI version 1.2.2 (build: release, commit: 0190097)"
// (ContainerVersion/ReleaseVersion.swift, since 0.6.0); 0.1.0 added
// ", sdk: MacOS 15" inside the parentheses. Up to 1.2.2 at least, the API
// server's version in `container system status` is the same banner,
// "container-apiserver version 1.1.0 (build: release, commit: 5973b9c)";
// by 1.4.1 it is the bare version (apple/container PR #1769).
// versionWordRE takes the version after the word "version", whatever the
// program's name; bareVersionRE takes a line that holds nothing but a
// version.
var (
	versionWordRE = regexp.MustCompile(`(?i)\bversion:?\s+v?(\d+\.\d+(?:\.\d+)?(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?)`)
	bareVersionRE = regexp.MustCompile(`^\s*v?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?)\s*$`)
	// emptyVersionRE is a banner whose version is empty: MacPorts' port
	// built the CLI without RELEASE_VERSION up to its 1.2.1 update, and it
	// printed "container CLI version  (build: release, commit: )"
	// (macports/macports-ports PR #33932).
	emptyVersionRE = regexp.MustCompile(`(?i)\bversion\s+\(build:`)
	// gitDescribeRE is a version `git describe` made for a build between
	// releases, "1.1.0-23-g7b94575": 23 commits after 1.1.0 (apple/container
	// PR #16 and PR #1769 show such versions).
	gitDescribeRE = regexp.MustCompile(`^(.+?)-(\d+)-g([0-9a-f]{4,40})(?:[-.](dirty))?$`)
)

// Errors of version parsing.
var (
	// errNoVersion: the output holds no version this package recognises.
	errNoVersion = errors.New("no version in the output")
	// errEmptyVersion: the output is a version banner with an empty
	// version.
	errEmptyVersion = errors.New("the version banner has an empty version (a build made without RELEASE_VERSION, such as MacPorts' port before 1.2.1)")
)

// parseVersion finds the version in the output of `container --version`,
// or in the API server's version from `container system status`: a banner
// or a bare version.
func parseVersion(out string) (*semver.Version, error) {
	if m := versionWordRE.FindStringSubmatch(out); m != nil {
		return newVersion(m[1])
	}
	for line := range strings.Lines(out) {
		if m := bareVersionRE.FindStringSubmatch(line); m != nil {
			return newVersion(m[1])
		}
	}
	if emptyVersionRE.MatchString(out) {
		return nil, fmt.Errorf("%q: %w", firstLine(out), errEmptyVersion)
	}
	return nil, fmt.Errorf("%q: %w", firstLine(out), errNoVersion)
}

// newVersion parses v. A build between releases, "1.1.0-23-g7b94575", is
// read as 1.1.0 with build metadata "23.g7b94575": semantic versioning
// would take "-23-g7b94575" for a pre-release and sort the build below the
// release it comes after, refusing a 1.1.0 development build as older than
// 1.1.0.
func newVersion(v string) (*semver.Version, error) {
	if m := gitDescribeRE.FindStringSubmatch(v); m != nil {
		meta := m[2] + ".g" + m[3]
		if m[4] != "" {
			meta += "." + m[4]
		}
		v = m[1] + "+" + meta
	}
	return semver.NewVersion(v)
}

// sameVersion reports whether a and b are the same build: the same
// version, pre-release and build metadata (a development build's commit
// count and hash).
func sameVersion(a, b *semver.Version) bool {
	return a.Equal(b) && a.Metadata() == b.Metadata()
}

// versionInfo is one entry of `container system version --format json`
// (SystemVersion.swift, since 0.10.0): the CLI's and, when the API server
// answers, the server's.
type versionInfo struct {
	AppName   string `json:"appName"`
	Version   string `json:"version"`
	BuildType string `json:"buildType"`
	Commit    string `json:"commit"`
}

// parseSystemVersion finds the CLI's version, the entry named "container",
// in the output of `container system version --format json`.
func parseSystemVersion(out []byte) (*semver.Version, error) {
	var infos []versionInfo
	if err := json.Unmarshal(out, &infos); err != nil {
		return nil, fmt.Errorf("system version: %w", err)
	}
	for _, in := range infos {
		if in.AppName == "container" {
			return newVersion(in.Version)
		}
	}
	return nil, fmt.Errorf("system version: no entry for the CLI: %w", errNoVersion)
}

// tooOld is the error for a CLI or an API server older than MinVersion:
// why Carapace cannot use it, and what to install.
func tooOld(what string, v *semver.Version, fix string) error {
	return fmt.Errorf("container %s %s is too old: Carapace needs Apple's container %s or later, because before %s "+
		"a host socket mounted into the container with -v cannot be reached from inside the VM by a non-root process "+
		"(apple/container issue #1750, PR #1751), so the agent could not reach the core; %s: %w",
		what, v, MinVersion, MinVersion, fix, runtime.ErrUnavailable)
}

// installHint says what to install and where from.
var installHint = fmt.Sprintf("install %s or later (%s or later recommended) from %s", MinVersion, RecommendedVersion, ReleasesURL)

// firstLine returns s's first non-empty line, trimmed and cut to a length
// fit for an error message.
func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			return textutil.Clip(line, 200)
		}
	}
	return ""
}
