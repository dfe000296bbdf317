package broker

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/topics"
)

func init() {
	register(api{key: 32, min: 0, max: 4, serve: serveDescribeConfigs, fail: failDescribeConfigs})
}

// serveDescribeConfigs serves DescribeConfigs (key 32), versions 0–4.
//
// Topic resources list all 31 topic configs of Apache 3.7 with their
// effective values; broker resources named by this broker's id list its
// configs, the empty name the cluster-wide dynamic defaults only (as
// Apache's ConfigHelper); group resources (32) every group config with its
// effective value, GROUP_CONFIG or DEFAULT_CONFIG (group_configs.go). Each
// entry carries its source (topic override,
// dynamic per-broker, dynamic cluster default, static command line,
// default; v1+), its synonyms in priority order when asked (v1+), its
// type and documentation when asked (v3+), read-only for broker configs
// that cannot change at run time, and IsDefault (v0 only). Per-resource
// errors: an invalid topic name → INVALID_TOPIC_EXCEPTION, an unknown
// topic → UNKNOWN_TOPIC_OR_PARTITION, another broker's id or another
// resource type → INVALID_REQUEST. Names asked for that do not exist are
// left out.
//
// With --authorizer: DESCRIBE_CONFIGS on the cluster for broker resources
// (CLUSTER_AUTHORIZATION_FAILED), on the topic for topics
// (TOPIC_AUTHORIZATION_FAILED), on the group for groups
// (GROUP_AUTHORIZATION_FAILED).
func serveDescribeConfigs(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	a := b.sec.Access(c)
	for _, rr := range req.Resources {
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		if out.ErrorCode = a.Configs(acl.DescribeConfigs, rr.ResourceType, rr.ResourceName); out.ErrorCode != 0 {
			resp.Resources = append(resp.Resources, out)
			continue
		}
		entries, err := b.describeResource(rr.ResourceType, rr.ResourceName, rr.ConfigNames)
		if err != nil {
			out.ErrorCode, out.ErrorMessage = b.errCode(err)
			if out.ErrorCode == kerr.UnknownTopicOrPartition.Code {
				out.ErrorMessage = nil // Apache sends the bare code here
			}
			b.log.Debug("describe configs failed", "resource_type", rr.ResourceType, "resource", rr.ResourceName, "err", err)
		}
		for _, e := range entries {
			out.Configs = append(out.Configs, describedConfig(e, req))
		}
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}

// describeResource lists one resource's config entries.
func (b *Broker) describeResource(typ kmsg.ConfigResourceType, name string, names []string) ([]configEntry, error) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if err := topics.ValidateName(name); err != nil {
			return nil, &topicError{kerr.InvalidTopicException.Code, err.Error()}
		}
		if internalByName(name) != nil {
			// Apache creates them compacted.
			return b.topicConfigEntries(map[string]string{"cleanup.policy": "compact"}, names), nil
		}
		t := b.topics.load().byName[name]
		if t == nil {
			return nil, &topicError{kerr.UnknownTopicOrPartition.Code, "unknown topic " + name}
		}
		return b.topicConfigEntries(t.meta.Configs, names), nil
	case kmsg.ConfigResourceTypeBroker:
		if name == "" {
			return b.brokerConfigEntries(false, names), nil
		}
		if err := b.checkBrokerResource(name, "Unexpected broker id, expected %d or empty string, but received %s"); err != nil {
			return nil, err
		}
		return b.brokerConfigEntries(true, names), nil
	case kmsg.ConfigResourceTypeClientMetrics:
		return b.clientMetricsEntries(name, names)
	case kmsg.ConfigResourceTypeGroupConfig:
		return b.groupConfigEntries(name, names)
	}
	return nil, &topicError{kerr.InvalidRequest.Code, fmt.Sprintf("Unsupported resource type: %s", typ)}
}

// checkBrokerResource accepts a broker resource named by this broker's id.
func (b *Broker) checkBrokerResource(name, mismatch string) error {
	id, err := strconv.Atoi(name)
	if err != nil {
		return &topicError{kerr.InvalidRequest.Code, "Broker id must be an integer, but it is: " + name}
	}
	if int32(id) != b.cfg.BrokerID {
		return &topicError{kerr.InvalidRequest.Code, fmt.Sprintf(mismatch, b.cfg.BrokerID, name)}
	}
	return nil
}

func describedConfig(e configEntry, req *kmsg.DescribeConfigsRequest) kmsg.DescribeConfigsResponseResourceConfig {
	out := kmsg.NewDescribeConfigsResponseResourceConfig()
	out.Name, out.Value, out.ReadOnly = e.name, e.value, e.readOnly
	out.Source = e.source
	out.IsDefault = e.source == kmsg.ConfigSourceDefaultConfig // v0's form of the source
	out.ConfigType = kmsg.ConfigType(e.typ)
	if req.IncludeSynonyms {
		for _, s := range e.synonyms {
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = s.Name, kmsg.StringPtr(s.Value), s.Source
			out.ConfigSynonyms = append(out.ConfigSynonyms, syn)
		}
	}
	if req.IncludeDocumentation {
		out.Documentation = kmsg.StringPtr(e.doc)
	}
	return out
}

func failDescribeConfigs(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType, out.ResourceName, out.ErrorCode = rr.ResourceType, rr.ResourceName, code
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}
