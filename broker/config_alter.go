package broker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/state/acl"
	"kaas/state/brokerconfig"
	"kaas/state/topics"
)

// configChange is one config of an alter request, in either API's shape.
type configChange struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp // AlterConfigs: always SET
	value *string
}

// alterResource applies one resource's changes for IncrementalAlterConfigs
// and AlterConfigs (replace: the changes are the resource's whole new
// configuration). The checks and their order are Apache 3.7's broker
// pre-processing (ConfigAdminManager.preprocess) followed by the
// controller's (ConfigurationControlManager).
func (b *Broker) alterResource(typ kmsg.ConfigResourceType, name string, changes []configChange, replace, validateOnly bool) error {
	seen := map[string]bool{}
	var nulls []string
	for _, ch := range changes {
		if seen[ch.name] {
			return &topicError{kerr.InvalidRequest.Code, "Error due to duplicate config keys"}
		}
		seen[ch.name] = true
		if ch.op != kmsg.IncrementalAlterConfigOpDelete && ch.value == nil {
			nulls = append(nulls, ch.name)
		}
		if ch.op < kmsg.IncrementalAlterConfigOpSet || ch.op > kmsg.IncrementalAlterConfigOpSubtract {
			return &topicError{kerr.InvalidRequest.Code, fmt.Sprintf("Unknown operations type %d", ch.op)}
		}
	}
	if len(nulls) > 0 {
		return &topicError{kerr.InvalidRequest.Code, "Null value not supported for : " + strings.Join(nulls, ", ")}
	}
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if name == "" {
			return &topicError{kerr.InvalidRequest.Code, "Default topic resources are not allowed."}
		}
		if err := topics.ValidateName(name); err != nil {
			return &topicError{kerr.InvalidTopicException.Code, err.Error()}
		}
		return b.alterTopicConfigs(name, validateOnly, func(current map[string]string) (map[string]string, error) {
			return applyChanges(current, changes, replace, func(key string) (bool, string) {
				return topics.IsList(key), topics.Specs[key].Default
			}, func(key string) error {
				return &topicError{kerr.InvalidConfig.Code, fmt.Sprintf("Can't %s to key %s because its type is not LIST.", opName(key, changes), key)}
			})
		})
	case kmsg.ConfigResourceTypeBroker:
		perBroker := name != ""
		if perBroker {
			if err := b.checkBrokerResource(name, "Unexpected broker id, expected %d, but received %s"); err != nil {
				return err
			}
		}
		return b.alterBrokerConfigs(perBroker, validateOnly, func(current map[string]string) (map[string]string, error) {
			return applyChanges(current, changes, replace, func(key string) (bool, string) {
				s := brokerconfig.Specs[key]
				def := ""
				if s.Default != nil {
					def = *s.Default
				}
				return s.Type == topics.TypeList, def
			}, func(key string) error {
				return &topicError{kerr.InvalidConfig.Code, "Config value append is not allowed for config key: " + key}
			})
		})
	case kmsg.ConfigResourceTypeClientMetrics:
		if name == "" {
			return &topicError{kerr.InvalidRequest.Code, "Subscription name can't be empty"}
		}
		return b.alterClientMetrics(name, changes, replace, validateOnly)
	case kmsg.ConfigResourceTypeGroupConfig:
		return b.alterGroupConfigs(name, changes, replace, validateOnly)
	}
	return &topicError{kerr.InvalidRequest.Code, fmt.Sprintf("Unknown resource type %d", int8(typ))}
}

// applyChanges computes a resource's new configs. APPEND and SUBTRACT work
// on LIST configs only, starting from the default when unset, as in
// Apache; a list emptied by SUBTRACT stays set, to the empty string.
func applyChanges(current map[string]string, changes []configChange, replace bool,
	spec func(key string) (isList bool, def string), notList func(key string) error) (map[string]string, error) {
	next := map[string]string{}
	if !replace {
		for k, v := range current {
			next[k] = v
		}
	}
	for _, ch := range changes {
		switch ch.op {
		case kmsg.IncrementalAlterConfigOpSet:
			next[ch.name] = *ch.value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, ch.name)
		default:
			isList, def := spec(ch.name)
			if !isList {
				return nil, notList(ch.name)
			}
			old, ok := next[ch.name]
			if !ok {
				old = def
			}
			parts := splitItems(old)
			for _, item := range strings.Split(*ch.value, ",") {
				if ch.op == kmsg.IncrementalAlterConfigOpAppend {
					if !contains(parts, item) {
						parts = append(parts, item)
					}
				} else {
					parts = remove(parts, item)
				}
			}
			next[ch.name] = strings.Join(parts, ",")
		}
	}
	return next, nil
}

func opName(key string, changes []configChange) string {
	for _, ch := range changes {
		if ch.name == key && ch.op == kmsg.IncrementalAlterConfigOpSubtract {
			return "SUBTRACT"
		}
	}
	return "APPEND"
}

func splitItems(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func remove(list []string, s string) []string {
	out := list[:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// duplicateResources finds resources named more than once in a request:
// Apache answers INVALID_REQUEST for every copy.
func duplicateResources(n int, key func(i int) string) map[string]bool {
	count := map[string]int{}
	for i := 0; i < n; i++ {
		count[key(i)]++
	}
	dups := map[string]bool{}
	for k, c := range count {
		if c > 1 {
			dups[k] = true
		}
	}
	return dups
}

func resourceKey(typ kmsg.ConfigResourceType, name string) string {
	return fmt.Sprintf("%d/%s", int8(typ), name)
}

// sortedNames is for stable log lines.
func sortedNames(changes []configChange) []string {
	out := make([]string, len(changes))
	for i, c := range changes {
		out[i] = c.name
	}
	sort.Strings(out)
	return out
}

// alterRequest is one resource of an AlterConfigs or
// IncrementalAlterConfigs request.
type alterRequest struct {
	typ     kmsg.ConfigResourceType
	name    string
	changes []configChange
}

// alterAll applies each resource's changes in request order (replace:
// AlterConfigs' whole-set semantics) and returns each one's error code and
// message. A resource named twice is INVALID_REQUEST for every mention.
func (b *Broker) alterAll(a auth.Access, api string, reqs []alterRequest, replace, validateOnly bool) (codes []int16, msgs []*string) {
	dups := duplicateResources(len(reqs), func(i int) string { return resourceKey(reqs[i].typ, reqs[i].name) })
	codes, msgs = make([]int16, len(reqs)), make([]*string, len(reqs))
	for i, r := range reqs {
		if dups[resourceKey(r.typ, r.name)] {
			codes[i], msgs[i] = kerr.InvalidRequest.Code, kmsg.StringPtr("Each resource must appear at most once.")
			continue
		}
		if code := a.Configs(acl.AlterConfigs, r.typ, r.name); code != 0 {
			codes[i] = code
			continue
		}
		if err := b.alterResource(r.typ, r.name, r.changes, replace, validateOnly); err != nil {
			codes[i], msgs[i] = b.errCode(err)
			b.log.Info(api+" rejected", "resource_type", r.typ, "resource", r.name,
				"configs", sortedNames(r.changes), "error", kerr.ErrorForCode(codes[i]), "reason", err)
		}
	}
	return codes, msgs
}
