package inspect

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// treeLines renders any decoded JSON value as an indented key/value tree:
// objects by sorted key, lists by index, scalars inline.
func treeLines(v any) []string {
	var out []string
	var walk func(prefix string, v any, depth int)
	walk = func(prefix string, v any, depth int) {
		ind := strings.Repeat("  ", depth)
		switch x := v.(type) {
		case map[string]any:
			if prefix != "" {
				if len(x) == 0 {
					out = append(out, ind+prefix+": {}")
					return
				}
				out = append(out, ind+prefix+":")
				depth++
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(k, x[k], depth)
			}
		case []any:
			if len(x) == 0 {
				out = append(out, ind+prefix+": []")
				return
			}
			out = append(out, fmt.Sprintf("%s%s: (%d)", ind, prefix, len(x)))
			for i, e := range x {
				walk(fmt.Sprintf("[%d]", i), e, depth+1)
			}
		default:
			out = append(out, ind+prefix+": "+scalar(x))
		}
	}
	walk("", v, 0)
	return out
}

func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case json.Number:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// summaryLine renders a digest as "key=value ...", keys sorted.
func summaryLine(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+scalar(m[k]))
	}
	return strings.Join(parts, " ")
}
