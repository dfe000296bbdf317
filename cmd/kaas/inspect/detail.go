package inspect

import (
	"encoding/json"
	"fmt"
	"strings"
)

// detailLines lays out one actor's detail (/api/actors/NAME) for the
// terminal: its mailbox figures and a sparkline of its last five minutes,
// then its state as a tree, the actors it relates to and its KIP-360
// events. Fields the layout does not know are shown as a tree at the end,
// so details added later still appear.
func detailLines(d map[string]any) []string {
	var out []string
	rest := map[string]any{}
	for k, v := range d {
		rest[k] = v
	}
	take := func(k string) any { v := rest[k]; delete(rest, k); return v }
	for _, k := range []string{"kind", "name", "uptime_sec", "summary"} {
		take(k)
	}
	running, _ := take("running").(bool)
	status := "running"
	if !running {
		status = "not running (state from the store)"
	}
	out = append(out, fmt.Sprintf("%s · mailbox %s · %s msgs/s · %s processed · last message %s",
		status, scalar(take("mailbox_depth")), scalar(take("messages_per_sec")), scalar(take("messages_processed")), ageOf(take("last_message_age_sec"))))
	if h, ok := take("history").(map[string]any); ok {
		if vals, ok := h["values"].(map[string]any); ok {
			out = append(out, "msgs/s, last 5 min  "+sparkline(vals["messages_per_sec"], 60))
			out = append(out, "mailbox, last 5 min "+sparkline(vals["mailbox_depth"], 60))
		}
	}
	out = append(out, "")
	out = append(out, "state:")
	for _, l := range treeLines(take("state")) {
		out = append(out, "  "+l)
	}
	if rel, ok := take("relations").(map[string]any); ok {
		if links, _ := rel["links"].([]any); len(links) > 0 {
			out = append(out, "", "related:")
			for _, l := range links {
				if m, ok := l.(map[string]any); ok {
					line := fmt.Sprintf("  %-16s %s", scalar(m["rel"]), scalar(m["label"]))
					if a, _ := m["actor"].(string); a != "" {
						line += "  → " + a
					}
					out = append(out, line)
				}
			}
		}
	}
	if evs, _ := take("events").([]any); len(evs) > 0 {
		out = append(out, "", "KIP-360 events (newest first):")
		for _, e := range evs {
			if m, ok := e.(map[string]any); ok {
				out = append(out, "  "+eventLine(m))
			}
		}
	}
	if len(rest) > 0 {
		out = append(out, "")
		out = append(out, treeLines(rest)...)
	}
	return out
}

// eventLine is one journal event on one line.
func eventLine(m map[string]any) string {
	parts := []string{scalar(m["at"]), scalar(m["kind"]), "producer " + scalar(m["producer_id"]),
		fmt.Sprintf("epoch %s→%s", scalar(m["prev_epoch"]), scalar(m["epoch"]))}
	for _, k := range []string{"reason", "transactional_id", "where", "code"} {
		if v, ok := m[k]; ok && v != "" {
			parts = append(parts, scalar(v))
		}
	}
	return strings.Join(parts, "  ")
}

func ageOf(v any) string {
	if n, ok := v.(json.Number); ok {
		if f, err := n.Float64(); err == nil {
			if f < 0 {
				return "never"
			}
			return age(f) + " ago"
		}
	}
	return "?"
}

// sparkline draws the last width values of a JSON number list in block
// characters, scaled to its maximum.
func sparkline(v any, width int) string {
	list, _ := v.([]any)
	if len(list) > width {
		list = list[len(list)-width:]
	}
	vals := make([]float64, 0, len(list))
	peak := 0.0
	for _, x := range list {
		f := 0.0
		if n, ok := x.(json.Number); ok {
			f, _ = n.Float64()
		}
		vals = append(vals, max(f, 0))
		peak = max(peak, f)
	}
	const blocks = "▁▂▃▄▅▆▇█"
	r := []rune(blocks)
	var b strings.Builder
	for _, f := range vals {
		i := 0
		if peak > 0 {
			i = int(f / peak * float64(len(r)-1))
		}
		b.WriteRune(r[i])
	}
	return fmt.Sprintf("%s  (peak %s)", b.String(), strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", peak), "0"), "."))
}
