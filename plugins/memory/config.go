package memory

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
)

// config is the plugin's configuration with its defaults filled in. The core
// validates the config against manifest.json's config_schema but fills in
// no default, so a missing key means the default below.
type config struct {
	StoragePath     string // absolute; "" means the DataDir given to New
	MaxBriefEntries int
	MaxBriefChars   int
	PurgeDays       int
	MaxStores       int // per session; 0 disables memory_store
	MaxSupersedes   int // per session; 0 disables supersedes
	MaxDeletes      int // per session; 0 disables memory_delete
}

// Defaults, as manifest.json declares them.
const (
	defaultMaxBriefEntries = 50
	defaultMaxBriefChars   = 10000
	defaultPurgeDays       = 90
	defaultMaxStores       = 20
	defaultMaxSupersedes   = 5
	defaultMaxDeletes      = 5
)

// maxPurgeDays bounds purge_superseded_days (the schema sets no maximum):
// a cutoff further back than a century purges nothing anyway.
const maxPurgeDays = 36500

// intSetting describes one integer setting: where it goes and its bounds.
type intSetting struct {
	dst      *int
	min, max int
}

// parseConfig reads the config the core passes to Init. Values arrive as
// JSON decodes them (numbers as json.Number); plain Go numbers are accepted
// too, for callers that build the map by hand. Errors never quote a value:
// a user may have put a secret in the wrong setting.
func parseConfig(raw map[string]any) (config, error) {
	c := config{
		MaxBriefEntries: defaultMaxBriefEntries,
		MaxBriefChars:   defaultMaxBriefChars,
		PurgeDays:       defaultPurgeDays,
		MaxStores:       defaultMaxStores,
		MaxSupersedes:   defaultMaxSupersedes,
		MaxDeletes:      defaultMaxDeletes,
	}
	ints := map[string]intSetting{
		"max_brief_entries":          {&c.MaxBriefEntries, 1, 500},
		"max_brief_chars":            {&c.MaxBriefChars, 200, 60000},
		"purge_superseded_days":      {&c.PurgeDays, 1, math.MaxInt32},
		"max_stores_per_session":     {&c.MaxStores, 0, math.MaxInt32},
		"max_supersedes_per_session": {&c.MaxSupersedes, 0, math.MaxInt32},
		"max_deletes_per_session":    {&c.MaxDeletes, 0, math.MaxInt32},
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := raw[k]
		if s, ok := ints[k]; ok {
			n, ok := asInt(v)
			if !ok {
				return c, fmt.Errorf("%s must be a whole number", k)
			}
			if n < int64(s.min) || n > int64(s.max) {
				return c, fmt.Errorf("%s must be from %d to %d", k, s.min, s.max)
			}
			*s.dst = int(n)
			continue
		}
		switch k {
		case "storage_path":
			p, ok := v.(string)
			if !ok {
				return c, errors.New("storage_path must be a string")
			}
			if p != "" && !filepath.IsAbs(p) {
				return c, errors.New("storage_path must be an absolute path (or left out for $CARAPACE_HOME/data/memory)")
			}
			if p != "" {
				c.StoragePath = filepath.Clean(p)
			}
		case "embedding_provider":
			// Search is FTS5's; semantic search (an embedding provider)
			// is not available yet. The setting stays so that a
			// config.toml that says "none" still loads.
			if v != "none" {
				return c, errors.New(`embedding_provider must be "none": semantic search is not available yet (leave the setting out)`)
			}
		default:
			return c, fmt.Errorf("unknown setting %q", k)
		}
	}
	c.PurgeDays = min(c.PurgeDays, maxPurgeDays)
	return c, nil
}

// asInt returns v as an integer if it is a whole number.
func asInt(v any) (int64, bool) {
	var f float64
	switch x := v.(type) {
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return n, true
		}
		g, err := x.Float64()
		if err != nil {
			return 0, false
		}
		f = g
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case float64:
		f = x
	default:
		return 0, false
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}
