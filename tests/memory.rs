//! The memory stream, retrieval scoring and the memory save format, checked against
//! hand-computed values (SPEC §2, §3.1, §3.2, §4, §11).

use bevy_generative_agents::memory::{
    AssociativeMemory, AssociativeMemoryJson, ChatLine, EMBEDDINGS_FILE, Filling, MemoryError,
    NODES_FILE, NewMemory, NodeId, NodeKind, RelevancePrecision, RetrievalParams, ScoredNode,
    SpatialMemory, new_retrieve, new_retrieve_many, score_breakdown,
};
use chrono::{NaiveDate, NaiveDateTime};
use serde_json::json;

fn t(hour: u32, minute: u32) -> NaiveDateTime {
    NaiveDate::from_ymd_opt(2023, 2, 13)
        .and_then(|d| d.and_hms_opt(hour, minute, 0))
        .expect("valid time")
}

fn close(a: f32, b: f64) -> bool {
    (f64::from(a) - b).abs() < 1e-4
}

/// Keywords as perception makes them: the last segment of subject and object.
fn perceived(
    created: NaiveDateTime,
    s: &str,
    p: &str,
    o: &str,
    poignancy: u8,
    vector: Vec<f32>,
) -> NewMemory {
    let last = |x: &str| x.rsplit(':').next().unwrap_or(x).to_owned();
    NewMemory::new(created, (s, p, o), format!("{} {p} {}", last(s), last(o)))
        .keywords([last(s), last(o)])
        .poignancy(poignancy)
        .embedding(vector)
}

/// The tiny memory of the hand computations:
///
/// | id | kind    | last accessed | poignancy | embedding  | note                         |
/// |----|---------|---------------|-----------|------------|------------------------------|
/// | 0  | event   | 00:00         | 2         | (1, 0)     |                              |
/// | 1  | event   | 04:00         | 8         | (0, 1)     |                              |
/// | 2  | thought | 08:00         | 5         | (0.6, 0.8) | evidence 0, 1                |
/// | 3  | event   | 09:00         | 1         | (1, 1)     | idle — never a candidate     |
/// | 4  | thought | 09:00         | 10        | (3, 0)     | expires 09:30 — excluded     |
/// | 5  | chat    | 09:00         | 9         | (1, 0)     | chats are not candidates     |
fn tiny() -> AssociativeMemory {
    let mut m = AssociativeMemory::new("hand", 2);
    let a = m
        .add_event(
            perceived(
                t(0, 0),
                "Ana Reyes",
                "is",
                "brewing coffee",
                2,
                vec![1.0, 0.0],
            ),
            vec![],
        )
        .unwrap();
    let b = m
        .add_event(
            perceived(t(4, 0), "Ben Okafor", "is", "studying", 8, vec![0.0, 1.0]),
            vec![],
        )
        .unwrap();
    let c = m
        .add_thought(
            NewMemory::new(
                t(8, 0),
                ("Ana Reyes", "likes", "Ben Okafor"),
                "Ana likes Ben",
            )
            .keywords(["Ana Reyes", "Ben Okafor"])
            .poignancy(5)
            .embedding(vec![0.6, 0.8]),
            vec![a, b],
        )
        .unwrap();
    m.add_event(
        perceived(
            t(9, 0),
            "Willowbrook:Reyes house:bedroom:bed",
            "is",
            "idle",
            1,
            vec![1.0, 1.0],
        ),
        vec![],
    )
    .unwrap();
    m.add_thought(
        NewMemory::new(
            t(9, 0),
            ("Ana Reyes", "plans", "a party"),
            "Ana plans a party at 9",
        )
        .expires(t(9, 30))
        .poignancy(10)
        .embedding(vec![3.0, 0.0]),
        vec![c],
    )
    .unwrap();
    m.add_chat(
        NewMemory::new(
            t(9, 0),
            ("Ana Reyes", "chat with", "Ben Okafor"),
            "Ana and Ben chat",
        )
        .keywords(["Ana Reyes", "Ben Okafor"])
        .poignancy(9)
        .embedding(vec![1.0, 0.0]),
        vec![
            ChatLine::new("Ana Reyes", "Hi Ben!"),
            ChatLine::new("Ben Okafor", "Hi Ana."),
        ],
    )
    .unwrap();
    m
}

fn breakdown_of(rows: &[ScoredNode], id: u32) -> ScoredNode {
    *rows
        .iter()
        .find(|r| r.id == NodeId(id))
        .expect("candidate present")
}

#[test]
fn scores_match_hand_computation() {
    let m = tiny();
    // Focal (2, 0) normalises to (1, 0). Now = 10:00.
    let rows = score_breakdown(&m, &[2.0, 0.0], t(10, 0), &RetrievalParams::default()).unwrap();
    // Idle (3), expired (4) and chat (5) nodes are not candidates.
    let mut ids: Vec<u32> = rows.iter().map(|r| r.id.0).collect();
    ids.sort();
    assert_eq!(ids, vec![0, 1, 2]);

    // Recency: 0.995^hours since last access: 10 h, 6 h, 2 h.
    let (n0, n1, n2) = (
        breakdown_of(&rows, 0),
        breakdown_of(&rows, 1),
        breakdown_of(&rows, 2),
    );
    assert!(close(n0.recency, 0.951_110_130), "{}", n0.recency); // 0.995^10
    assert!(close(n1.recency, 0.970_372_509), "{}", n1.recency); // 0.995^6
    assert!(close(n2.recency, 0.990_025), "{}", n2.recency); // 0.995^2
    // Normalised: (0.995^6 − 0.995^10) / (0.995^2 − 0.995^10) = 0.019262 / 0.038915 = 0.494988.
    assert!(close(n0.recency_norm, 0.0) && close(n2.recency_norm, 1.0));
    assert!(close(n1.recency_norm, 0.494_988), "{}", n1.recency_norm);

    // Relevance: cosines 1, 0, 0.6 → already span [0, 1].
    assert!(close(n0.relevance, 1.0) && close(n1.relevance, 0.0) && close(n2.relevance, 0.6));
    assert!(
        close(n0.relevance_norm, 1.0)
            && close(n1.relevance_norm, 0.0)
            && close(n2.relevance_norm, 0.6)
    );

    // Importance: poignancy 2, 8, 5 → 0, 1, 0.5.
    assert_eq!(
        (n0.importance, n1.importance, n2.importance),
        (2.0, 8.0, 5.0)
    );
    assert!(
        close(n0.importance_norm, 0.0)
            && close(n1.importance_norm, 1.0)
            && close(n2.importance_norm, 0.5)
    );

    // score = 0.5·rec + 3·rel + 2·imp:
    //   n0 = 0 + 3 + 0 = 3.0;  n1 = 0.5·0.494988 + 0 + 2 = 2.247494;  n2 = 0.5 + 1.8 + 1 = 3.3.
    assert!(close(n0.score, 3.0) && close(n1.score, 2.247_494) && close(n2.score, 3.3));
    assert_eq!(
        rows.iter().map(|r| r.id.0).collect::<Vec<_>>(),
        vec![2, 0, 1],
        "best first"
    );
}

#[test]
fn new_retrieve_returns_top_n_and_marks_them_accessed() {
    let mut m = tiny();
    let top = new_retrieve(
        &mut m,
        &[2.0, 0.0],
        t(10, 0),
        2,
        &RetrievalParams::default(),
    )
    .unwrap();
    assert_eq!(top, vec![NodeId(2), NodeId(0)]);
    assert_eq!(m.node(NodeId(2)).unwrap().last_accessed, t(10, 0));
    assert_eq!(m.node(NodeId(0)).unwrap().last_accessed, t(10, 0));
    assert_eq!(
        m.node(NodeId(1)).unwrap().last_accessed,
        t(4, 0),
        "not returned, not touched"
    );

    // At 12:00 with focal (0, 1): hours since access are 2, 8, 2, so recency normalises to
    // 1, 0, 1; relevance 0, 1, 0.8; importance 0, 1, 0.5.
    //   n0 = 0.5 + 0 + 0 = 0.5;  n1 = 0 + 3 + 2 = 5;  n2 = 0.5 + 2.4 + 1 = 3.9.
    let rows = score_breakdown(&m, &[0.0, 1.0], t(12, 0), &RetrievalParams::default()).unwrap();
    assert!(close(breakdown_of(&rows, 0).score, 0.5));
    assert!(close(breakdown_of(&rows, 1).score, 5.0));
    assert!(close(breakdown_of(&rows, 2).score, 3.9));
    let top = new_retrieve(
        &mut m,
        &[0.0, 1.0],
        t(12, 0),
        30,
        &RetrievalParams::default(),
    )
    .unwrap();
    assert_eq!(
        top,
        vec![NodeId(1), NodeId(2), NodeId(0)],
        "n larger than the candidates returns them all"
    );
}

#[test]
fn persona_multipliers_scale_the_weights() {
    let m = tiny();
    // Relevance only: (1, 0) ranks 0 (cos 1), 2 (0.6), 1 (0).
    let relevance_only = RetrievalParams {
        recency_w: 0.0,
        importance_w: 0.0,
        ..RetrievalParams::default()
    };
    let rows = score_breakdown(&m, &[1.0, 0.0], t(10, 0), &relevance_only).unwrap();
    assert_eq!(
        rows.iter().map(|r| r.id.0).collect::<Vec<_>>(),
        vec![0, 2, 1]
    );
    assert!(close(rows[1].score, 1.8)); // 3 × 0.6
    // Importance doubled: n1 = 0.5·0.494988 + 0 + 4·1 = 4.247494; n2 = 0.5 + 1.8 + 4·0.5 = 4.3.
    let importance_2x = RetrievalParams {
        importance_w: 2.0,
        ..RetrievalParams::default()
    };
    let rows = score_breakdown(&m, &[1.0, 0.0], t(10, 0), &importance_2x).unwrap();
    assert!(close(breakdown_of(&rows, 1).score, 4.247_494));
    assert!(close(breakdown_of(&rows, 2).score, 4.3));
}

#[test]
fn flat_ranges_normalise_to_one_half() {
    let mut m = AssociativeMemory::new("flat", 2);
    for (i, v) in [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]].into_iter().enumerate() {
        m.add_event(
            perceived(t(6, 0), "Ana", "is", &format!("doing {i}"), 4, v.to_vec()),
            vec![],
        )
        .unwrap();
    }
    // Same last_accessed and same poignancy: recency and importance are flat → 0.5 each.
    let rows = score_breakdown(&m, &[1.0, 0.0], t(9, 0), &RetrievalParams::default()).unwrap();
    for r in &rows {
        assert_eq!((r.recency_norm, r.importance_norm), (0.5, 0.5));
    }
    // score = 0.25 + 3·rel_norm + 1, rel = 1, 0, 0.7071 → norm 1, 0, 0.7071.
    assert!(close(breakdown_of(&rows, 0).score, 4.25));
    assert!(close(breakdown_of(&rows, 1).score, 1.25));
    assert!(close(
        breakdown_of(&rows, 2).score,
        1.25 + 3.0 * std::f64::consts::FRAC_1_SQRT_2
    ));
    // A zero focal vector makes relevance flat too.
    let rows = score_breakdown(&m, &[0.0, 0.0], t(9, 0), &RetrievalParams::default()).unwrap();
    assert!(
        rows.iter()
            .all(|r| r.relevance == 0.0 && r.relevance_norm == 0.5 && close(r.score, 2.75))
    );
    // All tied: newest first.
    assert_eq!(
        rows.iter().map(|r| r.id.0).collect::<Vec<_>>(),
        vec![2, 1, 0]
    );
}

#[test]
fn recency_counts_game_hours_not_ranks() {
    let mut m = AssociativeMemory::new("hours", 2);
    m.add_event(
        perceived(t(0, 0), "Ana", "is", "a", 3, vec![1.0, 0.0]),
        vec![],
    )
    .unwrap();
    m.add_event(
        perceived(t(9, 30), "Ana", "is", "b", 3, vec![0.0, 1.0]),
        vec![],
    )
    .unwrap();
    let rows = score_breakdown(&m, &[1.0, 0.0], t(10, 0), &RetrievalParams::default()).unwrap();
    assert!(close(breakdown_of(&rows, 0).recency, 0.995f64.powi(10)));
    assert!(close(breakdown_of(&rows, 1).recency, 0.995f64.powf(0.5)));
    let custom = RetrievalParams {
        recency_decay: 0.5,
        ..RetrievalParams::default()
    };
    let rows = score_breakdown(&m, &[1.0, 0.0], t(10, 0), &custom).unwrap();
    assert!(close(breakdown_of(&rows, 0).recency, 0.5f64.powi(10)));
}

#[test]
fn expiration_is_enforced_at_now() {
    let mut m = AssociativeMemory::new("exp", 2);
    let early = m
        .add_thought(
            NewMemory::new(t(1, 0), ("a", "b", "c"), "x")
                .expires(t(10, 0))
                .embedding(vec![1.0, 0.0]),
            vec![],
        )
        .unwrap();
    let late = m
        .add_thought(
            NewMemory::new(t(1, 0), ("a", "b", "d"), "y")
                .expires(t(10, 1))
                .embedding(vec![0.0, 1.0]),
            vec![],
        )
        .unwrap();
    let got = new_retrieve(
        &mut m,
        &[1.0, 0.0],
        t(10, 0),
        5,
        &RetrievalParams::default(),
    )
    .unwrap();
    assert_eq!(got, vec![late], "a thought expiring exactly now is gone");
    assert_eq!(m.node(early).unwrap().last_accessed, t(1, 0));
    assert!(
        new_retrieve(
            &mut m,
            &[1.0, 0.0],
            t(11, 0),
            5,
            &RetrievalParams::default()
        )
        .unwrap()
        .is_empty()
    );
}

#[test]
fn empty_and_zero_requests() {
    let mut m = AssociativeMemory::default();
    assert!(
        new_retrieve(
            &mut m,
            &[1.0, 2.0, 3.0],
            t(1, 0),
            30,
            &RetrievalParams::default()
        )
        .unwrap()
        .is_empty()
    );
    let mut m = tiny();
    assert!(
        new_retrieve(
            &mut m,
            &[1.0, 0.0],
            t(10, 0),
            0,
            &RetrievalParams::default()
        )
        .unwrap()
        .is_empty()
    );
    assert!(matches!(
        new_retrieve(
            &mut m,
            &[1.0, 0.0, 0.0],
            t(10, 0),
            3,
            &RetrievalParams::default()
        ),
        Err(MemoryError::DimensionMismatch {
            expected: 2,
            found: 3,
            ..
        })
    ));
    assert!(matches!(
        new_retrieve(
            &mut m,
            &[f32::INFINITY, 0.0],
            t(10, 0),
            3,
            &RetrievalParams::default()
        ),
        Err(MemoryError::NonFiniteEmbedding { .. })
    ));
}

#[test]
fn retrieve_many_runs_in_order_and_keys_by_text() {
    let mut m = tiny();
    let focal = vec![
        ("coffee".to_owned(), vec![1.0, 0.0]),
        ("study".to_owned(), vec![0.0, 1.0]),
    ];
    let got = new_retrieve_many(&mut m, &focal, t(10, 0), 1, &RetrievalParams::default()).unwrap();
    assert_eq!(got["coffee"], vec![NodeId(2)]);
    // The first retrieval marked node 2 accessed at 10:00, so at focal (0, 1) recency is
    // 0.995^10, 0.995^6, 1 → 0, 0.394, 1 and n0 = 0, n1 = 0.5·0.394 + 3 + 2 = 5.197,
    // n2 = 0.5 + 2.4 + 1 = 3.9.
    assert_eq!(got["study"], vec![NodeId(1)]);
}

#[test]
fn keyword_indexes_and_strengths() {
    let m = tiny();
    assert_eq!(m.keyword_strength(NodeKind::Event, "ana reyes"), 1);
    assert_eq!(m.keyword_strength(NodeKind::Event, "Brewing Coffee"), 1);
    assert_eq!(
        m.keyword_strength(NodeKind::Event, "bed"),
        0,
        "idle events do not count"
    );
    assert_eq!(m.keyword_strength(NodeKind::Event, "idle"), 0);
    assert_eq!(
        m.with_keyword(NodeKind::Event, "bed").collect::<Vec<_>>(),
        vec![NodeId(3)],
        "but they are indexed"
    );
    assert_eq!(m.keyword_strength(NodeKind::Thought, "ana reyes"), 1);
    assert_eq!(
        m.keyword_strength(NodeKind::Chat, "ana reyes"),
        0,
        "chats keep no strengths"
    );
    assert!(
        m.node(NodeId(0)).unwrap().keywords.contains("ana reyes"),
        "keywords are lowercased"
    );
    // Reactions: by keyword, newest first, each once; an address matches by its last segment.
    assert_eq!(
        m.retrieve_relevant_events("Ana Reyes", "is", "Ben Okafor"),
        vec![NodeId(1), NodeId(0)]
    );
    assert_eq!(
        m.retrieve_relevant_events("Willowbrook:Reyes house:bedroom:bed", "is", "idle"),
        vec![NodeId(3)]
    );
    assert_eq!(
        m.retrieve_relevant_thoughts("ANA REYES", "", ""),
        vec![NodeId(2)]
    );
    assert!(
        m.retrieve_relevant_thoughts("Cleo", "is", "away")
            .is_empty()
    );
    assert_eq!(
        m.last_chat_with("ben okafor").map(|n| n.id),
        Some(NodeId(5))
    );
    assert!(m.last_chat_with("Cleo").is_none());
    assert_eq!(
        (
            m.count(NodeKind::Event),
            m.count(NodeKind::Thought),
            m.count(NodeKind::Chat)
        ),
        (3, 2, 1)
    );
    assert_eq!(
        m.thoughts().map(|n| n.id.0).collect::<Vec<_>>(),
        vec![4, 2],
        "newest first"
    );
}

#[test]
fn latest_event_triples_are_newest_first() {
    let m = tiny();
    assert_eq!(
        m.latest_event_triples(2),
        vec![
            ("Willowbrook:Reyes house:bedroom:bed", "is", "idle"),
            ("Ben Okafor", "is", "studying")
        ]
    );
    assert_eq!(m.latest_event_triples(10).len(), 3);
    assert!(m.latest_event_triples(0).is_empty());
}

#[test]
fn thought_depth_and_fillings() {
    let mut m = tiny();
    let depth = |m: &AssociativeMemory, id: NodeId| m.node(id).unwrap().depth;
    assert_eq!(depth(&m, NodeId(0)), 0);
    assert_eq!(depth(&m, NodeId(5)), 0, "chats are depth 0");
    assert_eq!(depth(&m, NodeId(2)), 1, "thought on events");
    assert_eq!(depth(&m, NodeId(4)), 2, "thought on a thought");
    let lone = m.add_thought(
        NewMemory::new(t(11, 0), ("a", "b", "c"), "a b c").embedding(vec![1.0, 0.0]),
        vec![],
    );
    assert_eq!(
        depth(&m, lone.unwrap()),
        1,
        "a thought without evidence is depth 1"
    );
    let deep = m
        .add_thought(
            NewMemory::new(t(11, 0), ("a", "b", "d"), "a b c").embedding(vec![1.0, 0.0]),
            vec![NodeId(0), NodeId(4)],
        )
        .unwrap();
    assert_eq!(depth(&m, deep), 3);
    assert_eq!(
        m.node(NodeId(2)).unwrap().filling,
        Filling::Evidence(vec![NodeId(0), NodeId(1)])
    );
    assert_eq!(
        m.node(NodeId(5)).unwrap().filling.chat_lines()[1],
        ChatLine::new("Ben Okafor", "Hi Ana.")
    );
    assert!(matches!(
        m.add_thought(
            NewMemory::new(t(11, 0), ("a", "b", "c"), "a b c"),
            vec![NodeId(99)]
        ),
        Err(MemoryError::DanglingEvidence {
            evidence: NodeId(99),
            ..
        })
    ));
}

#[test]
fn poignancy_is_clamped() {
    let mut m = AssociativeMemory::new("p", 2);
    let lo = m.add_event(
        NewMemory::new(t(1, 0), ("a", "b", "c"), "x")
            .poignancy(0)
            .embedding(vec![1.0, 0.0]),
        vec![],
    );
    let hi = m.add_event(
        NewMemory::new(t(1, 0), ("a", "b", "c"), "x").poignancy(200),
        vec![],
    );
    assert_eq!(m.node(lo.unwrap()).unwrap().poignancy, 1);
    assert_eq!(m.node(hi.unwrap()).unwrap().poignancy, 10);
}

#[test]
fn embeddings_are_reused_for_identical_text() {
    let mut m = AssociativeMemory::new("reuse", 2);
    m.add_event(
        perceived(t(1, 0), "bed", "is", "idle", 1, vec![3.0, 4.0]),
        vec![],
    )
    .unwrap();
    // Same description, no vector: reuses the stored one.
    m.add_event(
        NewMemory::new(t(2, 0), ("bed", "is", "idle"), "bed is idle"),
        vec![],
    )
    .unwrap();
    // Same description, another vector: the stored one wins.
    m.add_event(
        perceived(t(3, 0), "bed", "is", "idle", 1, vec![1.0, 0.0]),
        vec![],
    )
    .unwrap();
    assert_eq!(m.embeddings().len(), 1);
    assert_eq!(m.embedding("bed is idle"), Some(&[0.6f32, 0.8][..]));
    // A different text without a vector is an error.
    assert!(matches!(
        m.add_event(
            NewMemory::new(t(4, 0), ("bed", "is", "made"), "bed is made"),
            vec![]
        ),
        Err(MemoryError::MissingEmbedding { .. })
    ));
    assert!(matches!(
        m.add_event(
            perceived(t(4, 0), "bed", "is", "made", 1, vec![1.0, 0.0, 0.0]),
            vec![]
        ),
        Err(MemoryError::DimensionMismatch {
            expected: 2,
            found: 3,
            ..
        })
    ));
    assert_eq!(m.len(), 3, "failed adds add nothing");
    assert_eq!(m.embeddings().model(), "reuse");
}

#[test]
fn quantized_and_exact_agree_on_a_clear_ranking() {
    let mut m = AssociativeMemory::new("q", 8);
    for i in 0..8u32 {
        let mut v = vec![0.05f32; 8];
        v[i as usize] = 1.0;
        m.add_event(
            perceived(t(1, 0), "Ana", "is", &format!("doing {i}"), 5, v),
            vec![],
        )
        .unwrap();
    }
    let focal = [1.0, 0.8, 0.6, 0.4, 0.2, 0.0, 0.0, 0.0];
    for precision in [RelevancePrecision::Exact, RelevancePrecision::Quantized] {
        let params = RetrievalParams {
            precision,
            ..RetrievalParams::default()
        };
        let rows = score_breakdown(&m, &focal, t(2, 0), &params).unwrap();
        assert_eq!(
            rows.iter().take(5).map(|r| r.id.0).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4],
            "{precision:?}"
        );
    }
}

#[test]
fn json_round_trip_keeps_everything() {
    let mut m = tiny();
    new_retrieve(
        &mut m,
        &[1.0, 0.0],
        t(10, 0),
        2,
        &RetrievalParams::default(),
    )
    .unwrap();
    let json = m.to_json().unwrap();
    assert_eq!(
        json.nodes[2]["last_accessed"],
        json!("2023-02-13T10:00:00"),
        "last_accessed is saved"
    );
    assert_eq!(json.nodes[5]["kind"], json!("chat"));
    assert_eq!(
        json.nodes[5]["filling"],
        json!({"chat": [["Ana Reyes", "Hi Ben!"], ["Ben Okafor", "Hi Ana."]]})
    );
    assert_eq!(json.nodes[2]["filling"], json!({"evidence": [0, 1]}));
    assert_eq!(json.embeddings["dim"], json!(2));
    assert_eq!(json.kw_strength["kw_strength_event"]["ana reyes"], json!(1));
    let back = AssociativeMemory::from_json(json).unwrap();
    assert_eq!(back, m);

    let text = m.to_json_strings().unwrap();
    let mut back =
        AssociativeMemory::from_json_strs(&text.nodes, &text.embeddings, &text.kw_strength)
            .unwrap();
    assert_eq!(back, m);
    let mut orig = m;
    let a = new_retrieve(
        &mut orig,
        &[0.0, 1.0],
        t(12, 0),
        3,
        &RetrievalParams::default(),
    )
    .unwrap();
    let b = new_retrieve(
        &mut back,
        &[0.0, 1.0],
        t(12, 0),
        3,
        &RetrievalParams::default(),
    )
    .unwrap();
    assert_eq!(a, b);
}

fn load_err(edit: impl FnOnce(&mut AssociativeMemoryJson)) -> MemoryError {
    let mut json = tiny().to_json().unwrap();
    edit(&mut json);
    AssociativeMemory::from_json(json).expect_err("corrupt input must not load")
}

#[test]
fn corrupt_saves_are_clear_errors() {
    let text = tiny().to_json_strings().unwrap();
    let truncated = &text.nodes[..text.nodes.len() / 2];
    let err = AssociativeMemory::from_json_strs(truncated, &text.embeddings, &text.kw_strength)
        .unwrap_err();
    assert!(
        matches!(
            err,
            MemoryError::Json {
                file: NODES_FILE,
                ..
            }
        ),
        "{err}"
    );

    let err = load_err(|j| j.nodes[1]["kind"] = json!("dream"));
    assert!(err.to_string().contains("unknown variant `dream`"), "{err}");
    assert!(err.to_string().starts_with("nodes.json: "), "{err}");

    let err = load_err(|j| j.nodes[2]["filling"] = json!({"evidence": [0, 7]}));
    assert!(
        matches!(&err, MemoryError::InFile { file: NODES_FILE, source }
            if matches!(**source, MemoryError::DanglingEvidence { node: NodeId(2), evidence: NodeId(7) })),
        "{err}"
    );
    let err = load_err(|j| j.nodes[2]["filling"] = json!({"evidence": [2]}));
    assert!(err.to_string().contains("not an older node"), "{err}");

    let err = load_err(|j| j.embeddings["vectors"]["Ana likes Ben"] = json!([1.0, 0.0, 0.0]));
    assert!(
        matches!(&err, MemoryError::InFile { file: EMBEDDINGS_FILE, source }
            if matches!(**source, MemoryError::DimensionMismatch { expected: 2, found: 3, .. })),
        "{err}"
    );

    let err = load_err(|j| {
        j.embeddings["vectors"]
            .as_object_mut()
            .unwrap()
            .remove("Ana likes Ben");
    });
    assert!(
        err.to_string()
            .contains("no embedding is stored for \"Ana likes Ben\""),
        "{err}"
    );

    let err = load_err(|j| j.nodes[3]["poignancy"] = json!(0));
    assert!(err.to_string().contains("poignancy 0"), "{err}");

    let err = load_err(|j| j.nodes[5]["filling"] = json!({"evidence": []}));
    assert!(err.to_string().contains("is a chat"), "{err}");

    let err = load_err(|j| j.nodes.as_array_mut().unwrap().swap(0, 1));
    assert!(err.to_string().contains("found 1 where 0 was due"), "{err}");

    let err = load_err(|j| j.kw_strength = json!({"kw_strength_event": {"a": -1}}));
    assert!(
        matches!(
            err,
            MemoryError::Json {
                file: "kw_strength.json",
                ..
            }
        ),
        "{err}"
    );

    let err = load_err(|j| j.nodes[0]["created"] = json!("yesterday"));
    assert!(
        matches!(
            err,
            MemoryError::Json {
                file: NODES_FILE,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn loading_recomputes_derived_fields() {
    let mut json = tiny().to_json().unwrap();
    json.nodes[4]["depth"] = json!(40);
    json.nodes[4]["node_count"] = json!(0);
    json.nodes[0]["keywords"] = json!(["ANA REYES"]);
    let m = AssociativeMemory::from_json(json).unwrap();
    assert_eq!(
        m.node(NodeId(4))
            .map(|n| (n.depth, n.node_count, n.type_count)),
        Some((2, 5, 2))
    );
    assert_eq!(
        m.with_keyword(NodeKind::Event, "ana reyes")
            .collect::<Vec<_>>(),
        vec![NodeId(0)]
    );
}

#[test]
fn spatial_memory_saves_as_a_nested_object() {
    let mut s = SpatialMemory::default();
    s.add_address("Willowbrook:Riverside Cafe:cafe:coffee machine");
    s.add(
        "Willowbrook",
        Some("Riverside Cafe"),
        Some("cafe"),
        Some("bookshelf"),
    );
    s.add("Willowbrook", Some("Maple Park"), Some("park"), None);
    let json = s.to_json().unwrap();
    assert_eq!(
        json,
        json!({"Willowbrook": {"Maple Park": {"park": []}, "Riverside Cafe": {"cafe": ["bookshelf", "coffee machine"]}}})
    );
    assert_eq!(SpatialMemory::from_json(json).unwrap(), s);
    assert_eq!(
        s.accessible_objects("Willowbrook", "Riverside Cafe", "cafe"),
        vec!["bookshelf", "coffee machine"]
    );
    assert!(SpatialMemory::from_json(json!(["not", "a", "tree"])).is_err());
}
