package consumergroup

import (
	"regexp"
	"slices"
	"time"

	"kaas/storage/offsetlog"
)

// Regex subscriptions (KIP-848's SubscribedTopicRegex). Apache compiles
// them with RE2/J and matches whole topic names against the cluster's
// topics — internal ones too — every subscriber of a regex sharing one
// resolution per group, refreshed at most every 10 s and only when the
// group's regexes or the topics changed.
//
// kaas compiles with Go's regexp, which implements the same RE2 syntax
// (RE2/J is a port of RE2): same operators, classes, flags and
// linear-time guarantee, no backreferences or lookaround in either. Known
// differences: RE2/J accepts Java's named groups written (?<name>…) and
// Go does since 1.22 (both accept (?P<name>…)); \Q…\E, \pN and Unicode
// classes work in both; RE2/J's Pattern flags such as
// DISABLE_UNICODE_GROUPS are not reachable from a client. Matching is
// anchored (^(?:re)$), as RE2/J's matches() is.
//
// Apache resolves regexes on an executor and answers the first heartbeat
// before the result is in (the member gets its partitions one heartbeat
// later). kaas resolves on the group actor in the heartbeat itself: the
// topic list is in memory and matching it is cheap, so the first answer
// already carries the assignment. The refresh rules are Apache's.

// regexRefreshInterval is Apache's REGEX_BATCH_REFRESH_INTERVAL_MS.
const regexRefreshInterval = 10 * time.Second

// resolvedRegex is one regex and the topics it matched.
type resolvedRegex struct {
	topics      []string // sorted
	version     int64
	timestampMs int64
}

// compileRegex compiles a subscription regex for whole-name matches.
func compileRegex(re string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(re); err != nil {
		return nil, err
	}
	return regexp.Compile("^(?:" + re + ")$")
}

// subscribedRegexes counts the members subscribed to each regex, with old
// replaced by updated.
func (cg *consumerGroup) subscribedRegexes(old, updated *ConsumerMember) map[string]int {
	out := map[string]int{}
	for _, m := range cg.members {
		if m.SubscribedTopicRegex != "" {
			out[m.SubscribedTopicRegex]++
		}
	}
	if old != nil && old.SubscribedTopicRegex != "" {
		if out[old.SubscribedTopicRegex]--; out[old.SubscribedTopicRegex] <= 0 {
			delete(out, old.SubscribedTopicRegex)
		}
	}
	if updated != nil && updated.SubscribedTopicRegex != "" {
		out[updated.SubscribedTopicRegex]++
	}
	return out
}

// regexUpdate is what maybeUpdateRegexes decided.
type regexUpdate struct {
	bump    bool
	resolve map[string]*resolvedRegex // regexes to (re)store
	drop    []string                  // regexes nobody subscribes to any more
}

// maybeUpdateRegexes is Apache's maybeUpdateRegularExpressions with the
// resolution done at once: a member's new regex is validated
// (INVALID_REGULAR_EXPRESSION) and resolved; all the group's regexes are
// resolved again when some are unresolved or topics were created, at most
// every 10 s. Resolution keeps the topics canDescribe allows: as Apache
// 4.0, the permissions of the member whose heartbeat resolves them apply
// to the whole group's resolution (Apache's own known gap when members'
// principals differ). bump says the target assignment must be recomputed.
func (g *Group) maybeUpdateRegexes(old, updated *ConsumerMember, canDescribe func(string) bool) (regexUpdate, int16, string) {
	cg := g.cg
	var u regexUpdate
	oldRe, newRe := old.SubscribedTopicRegex, updated.SubscribedTopicRegex
	subscribed := cg.subscribedRegexes(old, updated)
	requireRefresh := false
	if oldRe != newRe {
		if oldRe != "" && subscribed[oldRe] == 0 {
			u.drop = append(u.drop, oldRe)
		}
		if newRe != "" {
			if cg.subscribedRegexes(nil, nil)[newRe] == 0 {
				if _, err := compileRegex(newRe); err != nil {
					return u, errInvalidRegex, "SubscribedTopicRegex `" + newRe + "` is not a valid regular expression: " + err.Error() + "."
				}
				requireRefresh = true
			} else {
				u.bump = cg.regexes[newRe] != nil
			}
		}
	}
	if len(subscribed) == 0 {
		return u, 0, ""
	}
	now := g.nowMs()
	unresolved := false
	for re := range subscribed {
		if cg.regexes[re] == nil {
			unresolved = true
		}
	}
	if !requireRefresh && !unresolved && !(cg.newTopics && now > cg.regexRefreshMs+regexRefreshInterval.Milliseconds()) {
		return u, 0, ""
	}
	// Resolve every subscribed regex in one pass, as Apache's refresh.
	topics := g.env.Topics()
	names := topics.Names()
	u.resolve = map[string]*resolvedRegex{}
	for re := range subscribed {
		rx, err := compileRegex(re)
		if err != nil {
			// Validated when it arrived; a log replayed from elsewhere
			// could still hold one.
			g.log.Error("cannot compile a subscribed regex; ignoring it", "regex", re, "err", err)
			continue
		}
		r := &resolvedRegex{version: topics.Version(), timestampMs: now, topics: []string{}}
		for _, name := range names {
			if rx.MatchString(name) && (canDescribe == nil || canDescribe(name)) {
				r.topics = append(r.topics, name)
			}
		}
		if prev := cg.regexes[re]; prev == nil || !slices.Equal(prev.topics, r.topics) {
			u.bump = true
		}
		u.resolve[re] = r
	}
	g.log.Debug("resolved subscription regexes", "regexes", len(u.resolve), "topics_scanned", len(names))
	return u, 0, ""
}

// applyRegexUpdate stores the update and returns its records.
func (g *Group) applyRegexUpdate(u regexUpdate) []offsetlog.Record {
	var recs []offsetlog.Record
	for _, re := range u.drop {
		delete(g.cg.regexes, re)
		recs = append(recs, offsetlog.ConsumerRegexRecord(g.id, re, nil))
	}
	if u.resolve != nil {
		g.cg.newTopics = false
		g.cg.regexRefreshMs = g.nowMs()
	}
	for _, re := range sortedRegexKeys(u.resolve) {
		r := u.resolve[re]
		g.cg.regexes[re] = r
		recs = append(recs, offsetlog.ConsumerRegexRecord(g.id, re, &offsetlog.ConsumerRegex{Topics: r.topics, Version: r.version, TimestampMs: r.timestampMs}))
	}
	return recs
}

func sortedRegexKeys(m map[string]*resolvedRegex) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
