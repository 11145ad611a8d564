//! A real three-primary Redis Cluster on loopback ports, built with
//! `redis-cli --cluster create`, and the key slots as Redis Cluster computes them
//! (an independent copy of the CRC16, so that the tests check the module's own).
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use redis::{from_redis_value, RedisResult};

use super::{free_port, Connection, Server, Value};

pub const SLOTS: u16 = 16384;

pub fn cli_binary() -> String {
    std::env::var("RL_CLI").unwrap_or_else(|_| "redis-cli".into())
}

// ---------------------------------------------------------------------------------
// Key slots, as Redis Cluster computes them.

/// CRC16-CCITT (XMODEM), the checksum Redis Cluster hashes keys with.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The slot of a key: only the part between the first `{` and the next `}` is hashed
/// when that part is not empty.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            match rest.iter().position(|&b| b == b'}') {
                Some(close) if close > 0 => Some(&rest[..close]),
                _ => None,
            }
        })
        .unwrap_or(key);
    crc16(hashed) % SLOTS
}

/// A cluster-enabled server with the module. The default bus port (port + 10000) may
/// not exist for a high port, so each node gets a free one, chosen again with the
/// client port when a start fails (either may be taken between choosing and binding).
pub fn node(env: &[(&str, &str)]) -> Server {
    Server::start_with_fresh(
        || {
            [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "5000",
                "--cluster-port",
                &free_port().to_string(),
            ]
            .map(String::from)
            .to_vec()
        },
        env,
    )
}

/// The bus port a node was started with.
pub fn bus_port(node: &Server) -> u16 {
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("cluster-port")
        .query(&mut node.conn())
        .expect("CONFIG GET cluster-port");
    got.get(1)
        .and_then(|p| p.parse().ok())
        .expect("a cluster port")
}

pub struct Cluster {
    pub nodes: Vec<Server>,
    /// `CLUSTER MYID` of each node, in the order of `nodes`.
    pub ids: Vec<String>,
}

impl Cluster {
    /// Three primaries with the module, every slot assigned, `cluster_state:ok` on all.
    pub fn start() -> Cluster {
        Cluster::start_with_env(&[])
    }

    pub fn start_with_env(env: &[(&str, &str)]) -> Cluster {
        let nodes: Vec<Server> = (0..3).map(|_| node(env)).collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new(cli_binary())
            .args(["--cluster", "create"])
            .args(&addresses)
            .arg("--cluster-yes")
            .output()
            .expect("could not run redis-cli");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let ids = nodes
            .iter()
            .map(|n| {
                redis::cmd("CLUSTER")
                    .arg("MYID")
                    .query::<String>(&mut n.conn())
                    .expect("CLUSTER MYID")
            })
            .collect();
        let cluster = Cluster { nodes, ids };
        cluster.wait_ok();
        cluster
    }

    /// Polls (bounded) until every node says cluster_state:ok, knows the three nodes
    /// and sees all 16384 slots served by three distinct primaries.
    pub fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = self.nodes.iter().all(|n| {
                let Ok(mut c) = redis::Client::open(n.url())
                    .and_then(|cl| cl.get_connection_with_timeout(Duration::from_secs(2)))
                else {
                    return false;
                };
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut c)
                    .unwrap_or_default();
                let ok = info.lines().any(|l| l.trim() == "cluster_state:ok")
                    && info.lines().any(|l| l.trim() == "cluster_known_nodes:3");
                ok && slot_map(&mut c).is_ok_and(|m| {
                    m.iter().map(|r| u32::from(r.1 - r.0) + 1).sum::<u32>() == u32::from(SLOTS)
                        && m.iter().map(|r| r.2).collect::<BTreeSet<_>>().len() == 3
                })
            });
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not reach cluster_state:ok within 30 s:\n{}",
                self.nodes
                    .iter()
                    .map(|n| {
                        let mut c = n.conn();
                        redis::cmd("CLUSTER")
                            .arg("NODES")
                            .query::<String>(&mut c)
                            .unwrap_or_default()
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn conn(&self, node: usize) -> Connection {
        self.nodes[node].conn()
    }

    /// Index of the node listening on `port`.
    pub fn index_of(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|n| n.port == port)
            .unwrap_or_else(|| panic!("no node on port {port}"))
    }

    /// The node that serves `slot`, according to `CLUSTER SLOTS` on node 0.
    pub fn owner(&self, slot: u16) -> usize {
        let map = slot_map(&mut self.conn(0)).expect("CLUSTER SLOTS");
        let port = map
            .iter()
            .find(|r| (r.0..=r.1).contains(&slot))
            .map(|r| r.2)
            .unwrap_or_else(|| panic!("slot {slot} has no owner"));
        self.index_of(port)
    }

    /// The keys stored on one node (KEYS only looks at the node it is sent to).
    pub fn keys_on(&self, node: usize) -> BTreeSet<String> {
        redis::cmd("KEYS")
            .arg("*")
            .query(&mut self.conn(node))
            .expect("KEYS")
    }
}

/// `CLUSTER SLOTS` as (first slot, last slot, port of the primary).
pub fn slot_map(c: &mut Connection) -> RedisResult<Vec<(u16, u16, u16)>> {
    let ranges: Vec<Vec<Value>> = redis::cmd("CLUSTER").arg("SLOTS").query(c)?;
    ranges
        .iter()
        .map(|r| {
            let primary: Vec<Value> = from_redis_value(&r[2])?;
            Ok((
                from_redis_value(&r[0])?,
                from_redis_value(&r[1])?,
                from_redis_value(&primary[1])?,
            ))
        })
        .collect()
}

// ---------------------------------------------------------------------------------
// The cluster-aware client.
