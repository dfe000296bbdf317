package quota

import "strconv"

// Match types of a DescribeClientQuotas filter component.
const (
	MatchExact     = 0 // the named entity (Match set)
	MatchDefault   = 1 // the default entity of the type (Match null)
	MatchSpecified = 2 // any entity of the type (Match null)
)

// FilterComponent is one component of a DescribeClientQuotas filter.
type FilterComponent struct {
	Type      string
	MatchType int8
	Match     *string
}

// FilterError is a filter Apache refuses: INVALID_REQUEST, or
// UNSUPPORTED_VERSION for an entity type it does not know.
type FilterError struct {
	Unsupported bool
	Msg         string
}

func (e *FilterError) Error() string { return e.Msg }

// Describe lists the entities matching a filter, as Apache 4's
// ClientQuotasImage.describe: each component matches an exact name, the
// default or any entity of its type; strict also requires the entity to
// have no other component.
func (c *Config) Describe(comps []FilterComponent, strict bool) ([]Entry, error) {
	type want struct {
		any  bool
		name *string // nil: the default
	}
	wanted := map[string]want{}
	for _, comp := range comps {
		if comp.Type == "" {
			return nil, &FilterError{Msg: "Invalid empty entity type."}
		}
		if _, dup := wanted[comp.Type]; dup {
			return nil, &FilterError{Msg: "Entity type " + comp.Type + " cannot appear more than once in the filter."}
		}
		if comp.Type != TypeIP && comp.Type != TypeUser && comp.Type != TypeClientID {
			return nil, &FilterError{Unsupported: true, Msg: "Unsupported entity type " + comp.Type}
		}
		switch comp.MatchType {
		case MatchExact:
			if comp.Match == nil {
				return nil, &FilterError{Msg: "Request specified MATCH_TYPE_EXACT, but set match string to null."}
			}
			wanted[comp.Type] = want{name: comp.Match}
		case MatchDefault:
			if comp.Match != nil {
				return nil, &FilterError{Msg: "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."}
			}
			wanted[comp.Type] = want{}
		case MatchSpecified:
			if comp.Match != nil {
				return nil, &FilterError{Msg: "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."}
			}
			wanted[comp.Type] = want{any: true}
		default:
			return nil, &FilterError{Msg: "Unknown match type " + strconv.Itoa(int(comp.MatchType))}
		}
	}
	_, ip := wanted[TypeIP]
	_, user := wanted[TypeUser]
	_, client := wanted[TypeClientID]
	if ip && (user || client) {
		return nil, &FilterError{Msg: "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."}
	}
	var out []Entry
	for _, e := range c.Entries() {
		names := map[string]Name{TypeUser: e.Entity.User, TypeClientID: e.Entity.ClientID, TypeIP: e.Entity.IP}
		if strict && len(e.Entity.Components()) != len(wanted) {
			continue
		}
		ok := true
		for typ, w := range wanted {
			n := names[typ]
			switch {
			case !n.Present:
				ok = false
			case w.any:
			case w.name == nil:
				ok = n.Default
			default:
				ok = !n.Default && n.Value == *w.name
			}
			if !ok {
				break
			}
		}
		if ok {
			out = append(out, e)
		}
	}
	return out, nil
}
