package broker

import (
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/topics"
)

func init() {
	register(api{key: 34, min: 0, max: 2, serve: serveAlterReplicaLogDirs, fail: failAlterReplicaLogDirs})
}

// serveAlterReplicaLogDirs serves AlterReplicaLogDirs (key 34), versions
// 0–2.
//
// kaas has one log dir (log_dirs.go), so there is nowhere to move a
// replica to. As Apache's ReplicaManager.alterReplicaLogDirs: a directory
// that is not a log dir is LOG_DIR_NOT_FOUND; the data directory itself
// is already every replica's, so a partition this broker owns answers NONE
// (nothing to move), one it does not hold REPLICA_NOT_AVAILABLE (Apache's
// answer for a replica it does not have), an invalid topic name
// INVALID_TOPIC_EXCEPTION.
//
// ACL: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED on every
// partition.
func serveAlterReplicaLogDirs(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.AlterReplicaLogDirsRequest)
	if !b.sec.Access(c).Cluster(acl.Alter) {
		return failAlterReplicaLogDirs(req, kerr.ClusterAuthorizationFailed.Code)
	}
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	ours := b.logDir()
	byTopic := map[string]int{}
	for _, rd := range req.Dirs {
		for _, rt := range rd.Topics {
			i, ok := byTopic[rt.Topic]
			if !ok {
				i = len(resp.Topics)
				byTopic[rt.Topic] = i
				t := kmsg.NewAlterReplicaLogDirsResponseTopic()
				t.Topic = rt.Topic
				resp.Topics = append(resp.Topics, t)
			}
			for _, p := range rt.Partitions {
				rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				rp.Partition = p
				switch t := b.topics.load().byName[rt.Topic]; {
				case topics.ValidateName(rt.Topic) != nil:
					rp.ErrorCode = kerr.InvalidTopicException.Code
				case !filepath.IsAbs(rd.Dir) || filepath.Clean(rd.Dir) != ours:
					rp.ErrorCode = kerr.LogDirNotFound.Code
				case t == nil || p < 0 || int(p) >= len(t.parts) || t.parts[p] == nil:
					rp.ErrorCode = kerr.ReplicaNotAvailable.Code
				}
				if rp.ErrorCode != 0 {
					b.log.Info("alter replica log dirs refused", "dir", rd.Dir, "topic", rt.Topic, "partition", p, "code", kerr.ErrorForCode(rp.ErrorCode))
				}
				resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
			}
		}
	}
	return resp
}

func failAlterReplicaLogDirs(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.AlterReplicaLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	for _, rd := range req.Dirs {
		for _, rt := range rd.Topics {
			t := kmsg.NewAlterReplicaLogDirsResponseTopic()
			t.Topic = rt.Topic
			for _, p := range rt.Partitions {
				rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				t.Partitions = append(t.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, t)
		}
	}
	return resp
}
