package broker

import "sort"

// sortedTopics lists topics by name, for stable answers.
func sortedTopics(s *topicSet) []*topic {
	out := make([]*topic, 0, len(s.byName))
	for _, t := range s.byName {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].meta.Name < out[j].meta.Name })
	return out
}
