package broker

// entityChanges is what turns an entity's stored configs current into
// next in an entity store (entityStore.Apply): the keys whose value is
// new or changed, and the keys next no longer has. Both empty: nothing to
// write.
func entityChanges(current, next map[string]string) (set map[string]string, remove []string) {
	set = map[string]string{}
	for k, v := range next {
		if cur, ok := current[k]; !ok || cur != v {
			set[k] = v
		}
	}
	for k := range current {
		if _, ok := next[k]; !ok {
			remove = append(remove, k)
		}
	}
	return set, remove
}
