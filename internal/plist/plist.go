// Package plist reads the XML property lists this repository ships
// (Info.plist, the LaunchAgent) so that Linux tests can check them:
// dict, array, string, integer (as its text), true and false. It is not a
// general plist reader: data, date, real and binary plists are refused.
package plist

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
)

// Decode returns the dict at the top of an XML property list, with dicts
// as map[string]any, arrays as []any, strings and integers as string and
// booleans as bool.
func Decode(data []byte) (map[string]any, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	var top map[string]any
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			if top == nil {
				return nil, errors.New("plist: no dict")
			}
			return top, nil
		}
		if err != nil {
			return nil, fmt.Errorf("plist: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local == "plist" {
			continue
		}
		if se.Name.Local != "dict" || top != nil {
			return nil, fmt.Errorf("plist: want one top-level <dict>, found <%s>", se.Name.Local)
		}
		v, err := value(d, se)
		if err != nil {
			return nil, fmt.Errorf("plist: %w", err)
		}
		top = v.(map[string]any)
	}
}

// value decodes the element se starts.
func value(d *xml.Decoder, se xml.StartElement) (any, error) {
	switch se.Name.Local {
	case "true", "false":
		return se.Name.Local == "true", d.Skip()
	case "string", "integer", "key":
		var s string
		err := d.DecodeElement(&s, &se)
		return s, err
	case "dict", "array":
		return collection(d, se.Name.Local == "dict")
	}
	return nil, fmt.Errorf("unsupported element <%s>", se.Name.Local)
}

// collection decodes the members of a dict or an array up to its end.
func collection(d *xml.Decoder, isDict bool) (any, error) {
	dict, arr := map[string]any{}, []any{}
	key, haveKey := "", false
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.EndElement:
			if haveKey {
				return nil, fmt.Errorf("key %q has no value", key)
			}
			if isDict {
				return dict, nil
			}
			return arr, nil
		case xml.StartElement:
			v, err := value(d, tok)
			if err != nil {
				return nil, err
			}
			switch {
			case !isDict:
				arr = append(arr, v)
			case tok.Name.Local == "key":
				if haveKey {
					return nil, fmt.Errorf("key %q has no value", key)
				}
				key, haveKey = v.(string), true
			case !haveKey:
				return nil, fmt.Errorf("a <%s> in a dict has no key", tok.Name.Local)
			default:
				if _, dup := dict[key]; dup {
					return nil, fmt.Errorf("key %q repeated", key)
				}
				dict[key], haveKey = v, false
			}
		}
	}
}
