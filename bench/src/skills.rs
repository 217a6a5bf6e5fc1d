//! Skills: 500 skills discovered (each `SKILL.md` read and parsed, precedence resolved) against
//! reading the same files whole, and the discovery after one `SKILL.md` changed, which must
//! parse that one file only.

use std::time::{Duration, Instant};

use geminid::testing::skills::{Cache, Registry, places};

use crate::{ms, read_all, stats};

const SKILLS: usize = 500;
const ROUNDS: usize = 30;

pub async fn bench() -> anyhow::Result<Vec<String>> {
    eprintln!("skills: {SKILLS} skills discovered cold, and again after one SKILL.md changed");
    let t = geminid_tests::TestHome::new()?;
    let (home, ws) = (t.root().join("home"), t.root().join("ws"));
    // Split over the user's two folders and the workspace's, some names overriding.
    let dirs =
        [home.join(".gemini/skills"), home.join(".agents/skills"), ws.join(".gemini/skills")];
    for i in 0..SKILLS {
        let d = dirs[i % dirs.len()].join(format!("skill-{i}"));
        std::fs::create_dir_all(d.join("scripts"))?;
        std::fs::write(
            d.join("SKILL.md"),
            format!(
                "---\nname: skill-{}\ndescription: Skill {i}: what it does, when to use it, and its keywords.\n---\n{}\n",
                i % 480,
                "Step by step instructions for the task at hand.\n".repeat(40)
            ),
        )?;
    }
    let all = places(&home, &ws, true, &[]);
    let disabled = vec!["skill-7".to_owned()];
    let (mut baseline, mut cold, mut warm, mut one) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let t0 = Instant::now();
        let mut bytes = 0;
        for d in &dirs {
            bytes += read_all(d)?;
        }
        baseline.push(t0.elapsed());
        anyhow::ensure!(bytes > 0);
        let cache = Cache::default();
        let t0 = Instant::now();
        let r = Registry::resolve(&cache, &all, &disabled);
        cold.push(t0.elapsed());
        anyhow::ensure!(
            r.skills.len() == 480 && cache.reads() == SKILLS as u64,
            "{} skills",
            r.skills.len()
        );
    }
    let cache = Cache::default();
    Registry::resolve(&cache, &all, &disabled);
    let target = dirs[1].join("skill-100").join("SKILL.md");
    for round in 0..ROUNDS {
        let before = cache.reads();
        let t0 = Instant::now();
        Registry::resolve(&cache, &all, &disabled);
        warm.push(t0.elapsed());
        anyhow::ensure!(cache.reads() == before, "an unchanged discovery parsed a file");
        std::fs::write(
            &target,
            format!("---\nname: skill-100\ndescription: edited {round}\n---\nNew.\n"),
        )?;
        let t0 = Instant::now();
        let r = Registry::resolve(&cache, &all, &disabled);
        one.push(t0.elapsed());
        anyhow::ensure!(cache.reads() == before + 1, "more than the edited file parsed");
        anyhow::ensure!(r.skills["skill-100"].skill.description == format!("edited {round}"));
    }
    let (b, c, w, o): (_, _, _, _) = (stats(baseline), stats(cold), stats(warm), stats(one));
    let ratio = |d: Duration| d.as_secs_f64() / b.median.as_secs_f64();
    Ok(vec![
        format!(
            "| reading the {SKILLS} skill folders whole (baseline) | {:.2} ms | {:.2} ms | |",
            ms(b.median),
            ms(b.p99)
        ),
        format!(
            "| {SKILLS} skills discovered cold (every SKILL.md parsed, precedence, disabled) | {:.2} ms | {:.2} ms | ≤ 50 ms ({:.2}× the reading) |",
            ms(c.median),
            ms(c.p99),
            ratio(c.median)
        ),
        format!(
            "| the same again, nothing changed (0 files parsed) | {:.2} ms | {:.2} ms | |",
            ms(w.median),
            ms(w.p99)
        ),
        format!(
            "| the same after one SKILL.md edit (1 file parsed) | {:.2} ms | {:.2} ms | only that skill |",
            ms(o.median),
            ms(o.p99)
        ),
    ])
}
