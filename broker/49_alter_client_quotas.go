package broker

import (
	"errors"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/quota"
)

func init() {
	register(api{key: 49, min: 0, max: 1, blocking: true, serve: serveAlterClientQuotas, fail: failAlterClientQuotas})
}

// quotaAlteration is one entity of the request after Apache's map
// collapse.
type quotaAlteration struct {
	comps   []quota.Component // the entity as named, unknown types included
	entity  quota.Entity
	unknown []string
	ops     []kmsg.AlterClientQuotasRequestEntryOp
	code    int16
	msg     *string
}

// serveAlterClientQuotas serves AlterClientQuotas (key 49), versions 0–1.
//
// Sets or removes quota values of user, client-id, user+client-id and ip
// entities (each name or the default), with Apache 4's checks and
// messages (ClientQuotaControlManager), per entity: an empty entity, an
// unknown entity type, an empty name, ip combined with another type, an
// ip that is not an IP literal (Apache also resolves host names; kaas
// does no DNS lookup in a handler), a key the entity type does not have,
// a value not greater than 0 (NaN too), fractional or too large for an
// integral key → INVALID_REQUEST; a key named twice, or an entity named
// twice in a request → INVALID_REQUEST "Ignoring duplicate entity …" (its
// first mention is still applied, as Apache's). A type named twice in one
// entity keeps its last name (Apache builds a map). validate_only checks
// and changes nothing. Each entity's changes are written durably (the
// broker's config store, etcd in a cluster, where every broker applies
// them from its watch) before the answer. ip entities are stored and
// described; their connection_creation_rate is not enforced yet.
// Blocking: it writes to disk or etcd.
//
// With --authorizer: ALTER_CONFIGS on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED for every entity.
func serveAlterClientQuotas(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	alts := collapseQuotaEntries(req.Entries)
	if !b.sec.Access(c).Cluster(acl.AlterConfigs) {
		for _, a := range alts {
			a.code = kerr.ClusterAuthorizationFailed.Code
		}
	} else {
		b.alterClientQuotas(alts, req.ValidateOnly)
	}
	for _, a := range alts {
		out := kmsg.NewAlterClientQuotasResponseEntry()
		out.ErrorCode, out.ErrorMessage = a.code, a.msg
		for _, comp := range a.comps {
			ent := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = comp.Type, comp.Name
			out.Entity = append(out.Entity, ent)
		}
		resp.Entries = append(resp.Entries, out)
	}
	return resp
}

// collapseQuotaEntries turns the request's entries into alterations, one
// per distinct entity (a later mention is marked as a duplicate).
func collapseQuotaEntries(entries []kmsg.AlterClientQuotasRequestEntry) []*quotaAlteration {
	var out []*quotaAlteration
	byKey := map[string]*quotaAlteration{}
	for _, re := range entries {
		var comps []quota.Component
		for _, ent := range re.Entity {
			c := quota.Component{Type: ent.Type, Name: ent.Name}
			replaced := false
			for i := range comps {
				if comps[i].Type == c.Type {
					comps[i], replaced = c, true
				}
			}
			if !replaced {
				comps = append(comps, c)
			}
		}
		entity, unknown := quota.EntityFromWire(comps)
		key := rawEntityKey(comps)
		if prev := byKey[key]; prev != nil {
			prev.code, prev.msg = kerr.InvalidRequest.Code, kmsg.StringPtr("Ignoring duplicate entity "+rawEntityString(comps, entity))
			continue
		}
		a := &quotaAlteration{comps: comps, entity: entity, unknown: unknown, ops: re.Ops}
		byKey[key] = a
		out = append(out, a)
	}
	return out
}

func rawEntityKey(comps []quota.Component) string {
	parts := make([]string, len(comps))
	for i, c := range comps {
		n := "\x00"
		if c.Name != nil {
			n = *c.Name
		}
		parts[i] = c.Type + "\x01" + n
	}
	sort.Strings(parts)
	return strings.Join(parts, "\x02")
}

// rawEntityString is Apache's ClientQuotaEntity.toString, unknown types
// included.
func rawEntityString(comps []quota.Component, e quota.Entity) string {
	s := e.String()
	var extra []string
	for _, c := range comps {
		if c.Type != quota.TypeUser && c.Type != quota.TypeClientID && c.Type != quota.TypeIP {
			v := "null"
			if c.Name != nil {
				v = *c.Name
			}
			extra = append(extra, c.Type+"="+v)
		}
	}
	if len(extra) == 0 {
		return s
	}
	inner := strings.TrimSuffix(strings.TrimPrefix(s, "ClientQuotaEntity(entries={"), "})")
	if inner != "" {
		extra = append([]string{inner}, extra...)
	}
	return "ClientQuotaEntity(entries={" + strings.Join(extra, ", ") + "})"
}

// alterClientQuotas validates and applies each alteration, setting its
// code and message.
func (b *Broker) alterClientQuotas(alts []*quotaAlteration, validateOnly bool) {
	q := &b.quotas
	q.mu.Lock()
	defer q.mu.Unlock()
	cfg := q.cfg.Load()
	changed := false
	for _, a := range alts {
		set, remove, err := quotaChanges(cfg, a)
		if err == nil && !validateOnly && (len(set) > 0 || len(remove) > 0) {
			if err = q.store.Apply(a.entity.Key(), set, remove); err == nil {
				changed = true
				b.log.Info("altered client quotas", "entity", a.entity.String(), "set", set, "removed", remove)
			} else {
				b.log.Error("persisting client quotas failed", "entity", a.entity.String(), "err", err)
			}
		}
		var qe *quota.Error
		switch {
		case err == nil:
		case errors.As(err, &qe):
			if a.code == 0 { // a duplicate's error stands
				a.code, a.msg = kerr.InvalidRequest.Code, kmsg.StringPtr(qe.Msg)
			}
			b.log.Info("alter client quotas rejected", "entity", rawEntityString(a.comps, a.entity), "reason", qe.Msg)
		default:
			a.code, a.msg = kerr.UnknownServerError.Code, kmsg.StringPtr("persisting the quotas failed: "+err.Error())
		}
	}
	if changed {
		if err := b.reloadQuotas(); err != nil {
			b.log.Error("reloading client quotas failed", "err", err)
		}
	}
}

// quotaChanges checks one alteration against the current quotas and
// returns the stored values to set and the keys to remove.
func quotaChanges(cfg *quota.Config, a *quotaAlteration) (map[string]string, []string, error) {
	seen := map[string]bool{}
	for _, op := range a.ops {
		if seen[op.Key] {
			// Apache records "Duplicate quota key …" and then, finding
			// the entity already answered, replaces it with this.
			return nil, nil, &quota.Error{Msg: "Ignoring duplicate entity " + rawEntityString(a.comps, a.entity)}
		}
		seen[op.Key] = true
	}
	if err := quota.ValidateEntity(a.entity, a.unknown); err != nil {
		return nil, nil, err
	}
	current := cfg.Values(a.entity)
	set := map[string]string{}
	var remove []string
	for _, op := range a.ops {
		if op.Remove {
			if _, ok := current[op.Key]; ok {
				remove = append(remove, op.Key)
			}
			continue
		}
		if err := quota.ValidateValue(a.entity, op.Key, op.Value); err != nil {
			return nil, nil, err
		}
		if cur, ok := current[op.Key]; !ok || cur != op.Value {
			set[op.Key] = quota.FormatValue(op.Value)
		}
	}
	return set, remove, nil
}

func failAlterClientQuotas(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, re := range req.Entries {
		out := kmsg.NewAlterClientQuotasResponseEntry()
		out.ErrorCode = code
		for _, ent := range re.Entity {
			e := kmsg.NewAlterClientQuotasResponseEntryEntity()
			e.Type, e.Name = ent.Type, ent.Name
			out.Entity = append(out.Entity, e)
		}
		resp.Entries = append(resp.Entries, out)
	}
	return resp
}
