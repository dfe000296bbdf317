package quota

import (
	"sort"
	"strconv"
)

// Config is one immutable snapshot of every quota entity's values.
type Config struct {
	entries map[Entity]map[string]float64
}

// NewConfig takes ownership of entries (entity → key → value).
func NewConfig(entries map[Entity]map[string]float64) *Config {
	if entries == nil {
		entries = map[Entity]map[string]float64{}
	}
	return &Config{entries: entries}
}

// FromStrings builds a config from the stored form (entity key → quota
// key → decimal value), skipping what does not parse and reporting it.
func FromStrings(stored map[string]map[string]string) (*Config, []string) {
	var bad []string
	entries := map[Entity]map[string]float64{}
	for ek, values := range stored {
		e, err := ParseKey(ek)
		if err != nil {
			bad = append(bad, ek)
			continue
		}
		for k, v := range values {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				bad = append(bad, ek+"/"+k)
				continue
			}
			if entries[e] == nil {
				entries[e] = map[string]float64{}
			}
			entries[e][k] = f
		}
	}
	return NewConfig(entries), bad
}

// FormatValue is a value's stored form.
func FormatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Values are e's quotas (nil: none). The map must not be changed.
func (c *Config) Values(e Entity) map[string]float64 { return c.entries[e] }

// Entry is one entity and its values, for DescribeClientQuotas.
type Entry struct {
	Entity Entity
	Values map[string]float64
}

// Entries lists every entity with at least one value, in key order.
func (c *Config) Entries() []Entry {
	out := make([]Entry, 0, len(c.entries))
	for e, v := range c.entries {
		if len(v) > 0 {
			out = append(out, Entry{e, v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Entity.Key() < out[j].Entity.Key() })
	return out
}

// Len is the number of entities.
func (c *Config) Len() int { return len(c.entries) }

// Kind is what a quota limits; each has its own sensors, as each of
// Apache's quota managers does.
type Kind int

const (
	Produce Kind = iota
	Fetch
	Request
	ControllerMutation
	numKinds
)

// Kinds lists every kind.
var Kinds = [numKinds]Kind{Produce, Fetch, Request, ControllerMutation}

// Key is the quota key that sets the kind's limit.
func (k Kind) Key() string {
	return [...]string{ProducerByteRate, ConsumerByteRate, RequestPercentage, ControllerMutationRate}[k]
}

// String is Apache's QuotaType name (the metrics group).
func (k Kind) String() string {
	return [...]string{"Produce", "Fetch", "Request", "ControllerMutation"}[k]
}

// Tags name the sensor a client's usage is recorded on (Apache's quota
// metric tags): empty parts are levels the matching quota does not name,
// so every client under a user quota shares the user's sensor.
type Tags struct {
	User     string
	ClientID string
}

// levels a kind has quotas at (QuotaTypes): which decides the tags.
const (
	levelClientID     = 1
	levelUser         = 2
	levelUserClientID = 4
)

func levelOf(e Entity) int {
	switch {
	case e.IP.Present:
		return 0
	case e.User.Present && e.ClientID.Present:
		return levelUserClientID
	case e.User.Present:
		return levelUser
	case e.ClientID.Present:
		return levelClientID
	}
	return 0
}

// levels is the set of levels c has kind quotas at.
func (c *Config) levels(k Kind) int {
	l := 0
	for e, v := range c.entries {
		if _, ok := v[k.Key()]; ok {
			l |= levelOf(e)
		}
	}
	return l
}

func (c *Config) has(k Kind, e Entity) bool {
	_, ok := c.entries[e][k.Key()]
	return ok
}

func (c *Config) get(k Kind, e Entity) (float64, bool) {
	v, ok := c.entries[e][k.Key()]
	return v, ok
}

func ue(user, client Name) Entity { return Entity{User: user, ClientID: client} }

// tagsFor is DefaultQuotaCallback.quotaMetricTags: with quotas at one
// level only, the tags are that level's; otherwise the most specific
// entity with a quota, in Apache's order of precedence:
//
//	1 /config/users/<user>/clients/<client-id>
//	2 /config/users/<user>/clients/<default>
//	3 /config/users/<user>
//	4 /config/users/<default>/clients/<client-id>
//	5 /config/users/<default>/clients/<default>
//	6 /config/users/<default>
//	7 /config/clients/<client-id>
//	8 /config/clients/<default>
func (c *Config) tagsFor(k Kind, levels int, user, client string) Tags {
	switch levels {
	case 0, levelClientID:
		return Tags{ClientID: client}
	case levelUser:
		return Tags{User: user}
	case levelUserClientID:
		return Tags{User: user, ClientID: client}
	}
	u, cl := Named(user), Named(client)
	switch {
	case c.has(k, ue(u, cl)), c.has(k, ue(u, DefaultName)):
		return Tags{User: user, ClientID: client}
	case c.has(k, ue(u, Name{})):
		return Tags{User: user}
	case c.has(k, ue(DefaultName, cl)), c.has(k, ue(DefaultName, DefaultName)):
		return Tags{User: user, ClientID: client}
	case c.has(k, ue(DefaultName, Name{})):
		return Tags{User: user}
	}
	return Tags{ClientID: client}
}

// limitFor is DefaultQuotaCallback.quotaLimit: the quota that applies to
// a sensor with tags t, if any.
func (c *Config) limitFor(k Kind, t Tags) (float64, bool) {
	u, cl := Named(t.User), Named(t.ClientID)
	try := func(es ...Entity) (float64, bool) {
		for _, e := range es {
			if v, ok := c.get(k, e); ok {
				return v, true
			}
		}
		return 0, false
	}
	switch {
	case t.User != "" && t.ClientID != "":
		return try(ue(u, cl), ue(u, DefaultName), ue(DefaultName, cl), ue(DefaultName, DefaultName))
	case t.User != "":
		return try(ue(u, Name{}), ue(DefaultName, Name{}))
	case t.ClientID != "":
		return try(ue(Name{}, cl), ue(Name{}, DefaultName))
	}
	return 0, false
}

// Resolve is the sensor tags and limit for a client (user is the
// principal's name, client its client id) under c's kind quotas; ok
// false: no quota applies.
func (c *Config) Resolve(k Kind, user, client string) (Tags, float64, bool) {
	t := c.tagsFor(k, c.levels(k), user, client)
	v, ok := c.limitFor(k, t)
	return t, v, ok
}
