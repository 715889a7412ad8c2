//! A game's options from `env.kwargs`: how its end scores reach training
//! (`scoring`) and what they are divided by (`score_normaliser`).

use crate::env::EnvError;

/// What a finished game scores each seat.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scoring {
    /// The game's own scores (Big Two: the cards left in the losers'
    /// hands, summed for the winner; Nim: ±1).
    #[default]
    Game,
    /// Only who won: `players - 1` for the winner, -1 for every other seat
    /// (zero-sum like the game's own), whatever the margin. What the
    /// evaluation's win rates measure.
    Wins,
}

impl Scoring {
    /// The scores of a finished game (`scores`, the game's own, one per
    /// seat, the winner's the one positive) under this scoring.
    pub fn apply(self, scores: &[f64]) -> Vec<f64> {
        match self {
            Scoring::Game => scores.to_vec(),
            Scoring::Wins => {
                let losers = scores.len().saturating_sub(1) as f64;
                scores
                    .iter()
                    .map(|&s| if s > 0.0 { losers } else { -1.0 })
                    .collect()
            }
        }
    }
}

/// `env.kwargs` of a game.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GameOptions {
    /// Scores are divided by this (finite, > 0).
    pub normaliser: f64,
    pub scoring: Scoring,
}

impl GameOptions {
    /// The options of game `id` from `kwargs` (a JSON object, `""` for
    /// none): `score_normaliser` (a number > 0; by default the game's own
    /// scale under `game` scoring, 1 under `wins`) and `scoring` (`"game"`,
    /// the default, or `"wins"`). Any other key is refused, naming it.
    pub fn from_kwargs(id: &str, kwargs: &str) -> Result<Self, EnvError> {
        let bad = |reason: String| EnvError::External {
            id: id.to_string(),
            reason,
        };
        let map: serde_json::Map<String, serde_json::Value> = if kwargs.trim().is_empty() {
            serde_json::Map::new()
        } else {
            serde_json::from_str(kwargs).map_err(|e| bad(format!("env.kwargs: {e}")))?
        };
        if let Some(other) = map
            .keys()
            .find(|k| !["score_normaliser", "scoring"].contains(&k.as_str()))
        {
            return Err(bad(format!(
                "env.kwargs.{other}: a game takes only `score_normaliser` and `scoring`"
            )));
        }
        let scoring = match map.get("scoring") {
            None => Scoring::Game,
            Some(v) => match v.as_str() {
                Some("game") => Scoring::Game,
                Some("wins") => Scoring::Wins,
                _ => {
                    return Err(bad(format!(
                        "env.kwargs.scoring = {v}: must be \"game\" or \"wins\""
                    )));
                }
            },
        };
        let normaliser = match map.get("score_normaliser") {
            None if scoring == Scoring::Wins => 1.0,
            None => super::default_normaliser(id),
            Some(v) => v
                .as_f64()
                .filter(|x| x.is_finite() && *x > 0.0)
                .ok_or_else(|| {
                    bad(format!(
                        "env.kwargs.score_normaliser = {v}: must be a number > 0"
                    ))
                })?,
        };
        Ok(Self {
            normaliser,
            scoring,
        })
    }

    /// The default options of game `id` (no kwargs).
    pub fn of(id: &str) -> Self {
        Self {
            normaliser: super::default_normaliser(id),
            scoring: Scoring::Game,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wins_scoring_keeps_only_who_won() {
        // Big Two: the winner scores the others' 3 + 5 + 9 cards.
        let cards = [-3.0, 17.0, -5.0, -9.0];
        assert_eq!(Scoring::Game.apply(&cards), cards);
        assert_eq!(Scoring::Wins.apply(&cards), [-1.0, 3.0, -1.0, -1.0]);
        assert_eq!(Scoring::Wins.apply(&[-1.0, 1.0]), [-1.0, 1.0]);
        assert_eq!(Scoring::Wins.apply(&cards).iter().sum::<f64>(), 0.0);
    }

    #[test]
    fn kwargs_name_what_is_wrong() {
        let o = GameOptions::from_kwargs("BigTwo-v1", "").expect("none");
        assert_eq!(o, GameOptions::of("BigTwo-v1"));
        assert_eq!((o.normaliser, o.scoring), (5.0, Scoring::Game));
        let o = GameOptions::from_kwargs("BigTwo-v1", r#"{"scoring": "wins"}"#).expect("wins");
        assert_eq!((o.normaliser, o.scoring), (1.0, Scoring::Wins));
        let o = GameOptions::from_kwargs(
            "BigTwo-v0",
            r#"{"scoring": "game", "score_normaliser": 10}"#,
        )
        .expect("both");
        assert_eq!((o.normaliser, o.scoring), (10.0, Scoring::Game));
        for (kwargs, field) in [
            (r#"{"scoring": "cards"}"#, "env.kwargs.scoring"),
            (r#"{"scoring": 1}"#, "env.kwargs.scoring"),
            (r#"{"score_normaliser": -1}"#, "env.kwargs.score_normaliser"),
            (
                r#"{"score_normaliser": "x"}"#,
                "env.kwargs.score_normaliser",
            ),
            (r#"{"seats": 3}"#, "env.kwargs.seats"),
            ("[1]", "env.kwargs"),
        ] {
            let err = GameOptions::from_kwargs("BigTwo-v1", kwargs).expect_err(kwargs);
            assert!(err.to_string().contains(field), "{kwargs}: {err}");
        }
    }
}
