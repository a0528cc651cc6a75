package mail

import (
	"bytes"
	"encoding/json"
)

// normalise makes a config as config.toml decodes it look as the core
// hands it to Init: through JSON, numbers as json.Number.
func normalise(cfg map[string]any) (map[string]any, error) {
	if cfg == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	return out, dec.Decode(&out)
}

// AccountNames parses [plugins.mail.config] as the plugin does and
// returns its accounts' names, which are also their credentials' keys
// (for `carapace doctor`).
func AccountNames(cfg map[string]any) ([]string, error) {
	n, err := normalise(cfg)
	if err != nil {
		return nil, err
	}
	c, err := parseConfig(n)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(c.Accounts))
	for i, a := range c.Accounts {
		names[i] = a.Name
	}
	return names, nil
}
