package broker

// partitionSet is the partitions a request names, by topic, for the APIs
// whose null topic list means every partition (DescribeLogDirs,
// ListPartitionReassignments): nil when topics is nil.
func partitionSet[T any](topics []T, each func(*T) (string, []int32)) map[string]map[int32]bool {
	if topics == nil {
		return nil
	}
	out := map[string]map[int32]bool{}
	for i := range topics {
		name, ps := each(&topics[i])
		if out[name] == nil {
			out[name] = map[int32]bool{}
		}
		for _, p := range ps {
			out[name][p] = true
		}
	}
	return out
}
