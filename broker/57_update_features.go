package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/features"
)

func init() {
	register(api{key: 57, min: 0, max: 2, blocking: true, serve: serveUpdateFeatures, fail: failUpdateFeatures})
}

// featureAttempts bounds how often an update is checked again because
// another broker changed the features between its check and its write.
const featureAttempts = 3

// serveUpdateFeatures serves UpdateFeatures (key 57), versions 0–2
// (KIP-584; spec features.md).
//
// Changes the finalized level of supported features (transaction.version
// alone today, state/features). Each update is checked (R-FEA-2): an
// unknown feature, a level outside the supported range, a downgrade
// without a downgrade upgrade type (v0: AllowDowngrade), an upgrade with
// one → INVALID_UPDATE_VERSION; transaction.version cannot go below 2
// while transactions of transaction version 2 are open — in a cluster on
// any broker: each other live broker is asked to validate the change
// (UpdateFeatures validate-only, peer to peer) and checks its own. A feature named twice is INVALID_REQUEST. All or nothing, as
// Apache's controller: any failure applies none, and the top-level error
// is the first one (v0–1 also carry a result per feature; v2 the
// top-level error alone). ValidateOnly (v1+) checks and changes nothing.
// A change is durable (the config store; etcd in a cluster, every broker
// applying it from its watch) before the answer, and raises the
// finalized features epoch ApiVersions reports. Blocking: it writes.
//
// With --authorizer: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED
// (a peer broker's validation needs none).
func serveUpdateFeatures(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.UpdateFeaturesRequest)
	peer := b.sec.IsPeer(c)
	if !peer && !b.sec.Access(c).Cluster(acl.Alter) {
		return failUpdateFeatures(req, kerr.ClusterAuthorizationFailed.Code)
	}
	for attempt := 1; ; attempt++ {
		resp, err := updateFeatures(b, c, req, peer)
		if err == nil {
			return resp
		}
		if !errors.Is(err, errFeaturesMoved) {
			b.log.Error("storing finalized features", "err", err)
			return failUpdateFeatures(req, kerr.UnknownServerError.Code)
		}
		if attempt == featureAttempts {
			// Others keep changing them: the client may retry.
			b.log.Warn("feature update not applied: the features kept changing under it", "client", c.ClientID, "attempts", attempt)
			return failUpdateFeatures(req, kerr.RequestTimedOut.Code)
		}
	}
}

// updateFeatures checks req against the features as this broker has them
// and applies it, unless another broker changed them meanwhile
// (errFeaturesMoved: the broker has reloaded them, check again).
func updateFeatures(b *Broker, c *server.Call, req *kmsg.UpdateFeaturesRequest, peer bool) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	current := b.finalizedFeatures()
	levels := map[string]int16{}
	codes := make([]int16, len(req.FeatureUpdates))
	msgs := make([]string, len(req.FeatureUpdates))
	first := -1
	for i, fu := range req.FeatureUpdates {
		typ := features.UpgradeType(fu.UpgradeType)
		if req.Version == 0 {
			typ = features.Upgrade
			if fu.AllowDowngrade {
				typ = features.SafeDowngrade
			}
		}
		if _, dup := levels[fu.Feature]; dup {
			codes[i], msgs[i] = kerr.InvalidRequest.Code, "the feature "+fu.Feature+" is named more than once"
		} else {
			open := 0
			if fu.Feature == features.TransactionVersion {
				open = b.openTV2Transactions()
			}
			codes[i], msgs[i] = features.Check(features.Update{Name: fu.Feature, Level: fu.MaxVersionLevel, Type: typ}, current.levels[fu.Feature], open)
		}
		levels[fu.Feature] = max(fu.MaxVersionLevel, 0)
		if codes[i] != 0 && first < 0 {
			first = i
		}
	}
	if first < 0 && !peer && downgradesTV(req, current) {
		// In a cluster, the other brokers coordinate transactions too:
		// each checks its own (UpdateFeatures validate-only, peer to
		// peer).
		if i, code, msg := b.checkPeersFeatures(req); code != 0 {
			first, codes[i], msgs[i] = i, code, msg
		}
	}
	if first >= 0 {
		b.log.Info("feature update refused", "client", c.ClientID, "feature", req.FeatureUpdates[first].Feature,
			"level", req.FeatureUpdates[first].MaxVersionLevel, "reason", msgs[first])
		resp.ErrorCode, resp.ErrorMessage = codes[first], &msgs[first]
	} else if !req.ValidateOnly && len(levels) > 0 {
		if err := b.storeFeatures(levels, current.epoch); err != nil {
			return nil, err
		}
		b.log.Info("finalized features updated", "client", c.ClientID, "levels", levels, "epoch", b.finalizedFeatures().epoch)
	}
	if req.Version <= 1 {
		for i, fu := range req.FeatureUpdates {
			r := kmsg.NewUpdateFeaturesResponseResult()
			r.Feature, r.ErrorCode = fu.Feature, codes[i]
			if codes[i] != 0 {
				r.ErrorMessage = &msgs[i]
			}
			resp.Results = append(resp.Results, r)
		}
	}
	return resp, nil
}

// downgradesTV reports whether req takes transaction.version from 2 or
// more to below 2.
func downgradesTV(req *kmsg.UpdateFeaturesRequest, current *finalized) bool {
	for _, fu := range req.FeatureUpdates {
		if fu.Feature == features.TransactionVersion && current.levels[fu.Feature] >= 2 && fu.MaxVersionLevel < 2 {
			return true
		}
	}
	return false
}

// checkPeersFeatures asks every other live broker of the cluster to
// validate req (its own open TV2 transactions, R-FEA-2); it returns the
// index of the update a peer refused, its code and message, or code 0. A
// peer that cannot be asked refuses it (REQUEST_TIMED_OUT): the check is
// whole or the change is not made.
func (b *Broker) checkPeersFeatures(req *kmsg.UpdateFeaturesRequest) (int, int16, string) {
	if b.peers == nil {
		return 0, 0, ""
	}
	_, members := b.clusterView()
	for _, id := range members {
		if id == b.cfg.BrokerID {
			continue
		}
		v := kmsg.NewPtrUpdateFeaturesRequest()
		v.ValidateOnly, v.TimeoutMillis = true, req.TimeoutMillis
		for _, fu := range req.FeatureUpdates {
			u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
			u.Feature, u.MaxVersionLevel, u.UpgradeType = fu.Feature, fu.MaxVersionLevel, fu.UpgradeType
			if req.Version == 0 && fu.AllowDowngrade {
				u.UpgradeType = int8(features.SafeDowngrade)
			} else if req.Version == 0 {
				u.UpgradeType = int8(features.Upgrade)
			}
			v.FeatureUpdates = append(v.FeatureUpdates, u)
		}
		resp, err := b.peers.Request(id, v)
		if err != nil {
			return 0, kerr.RequestTimedOut.Code, fmt.Sprintf("broker %d could not check its open transactions: %v", id, err)
		}
		// The peer client negotiates the version: v2 answers with the
		// top-level error alone.
		r := resp.(*kmsg.UpdateFeaturesResponse)
		if r.ErrorCode != 0 && len(r.Results) == 0 {
			msg := fmt.Sprintf("broker %d refused it", id)
			if r.ErrorMessage != nil {
				msg = fmt.Sprintf("broker %d: %s", id, *r.ErrorMessage)
			}
			i := 0
			for j, fu := range req.FeatureUpdates {
				if fu.Feature == features.TransactionVersion {
					i = j
				}
			}
			return i, r.ErrorCode, msg
		}
		for i, res := range r.Results {
			if res.ErrorCode != 0 && i < len(req.FeatureUpdates) {
				msg := fmt.Sprintf("broker %d refused it", id)
				if res.ErrorMessage != nil {
					msg = fmt.Sprintf("broker %d: %s", id, *res.ErrorMessage)
				}
				return i, res.ErrorCode, msg
			}
		}
	}
	return 0, 0, ""
}

func failUpdateFeatures(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	resp.ErrorCode = code
	if req.Version <= 1 {
		for _, fu := range req.FeatureUpdates {
			res := kmsg.NewUpdateFeaturesResponseResult()
			res.Feature, res.ErrorCode = fu.Feature, code
			resp.Results = append(resp.Results, res)
		}
	}
	return resp
}
