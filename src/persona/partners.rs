//! Chat partners as entities: the ECS side of "who is talking with whom".
//!
//! The mind keeps the partner's *name* (prompts and saves need it); game code wants the
//! *entity*. [`ChattingWith`] is a relationship on a chatting persona pointing at its partner,
//! and [`ChatPartners`] the target side Bevy keeps on the partner, so despawning either persona
//! unlinks the other. [`link_chat_partners`] keeps the link in step with
//! [`ActionView::chatting_with`] whenever a view changes (a conversation landing or ending).

use bevy::platform::collections::HashMap;
use bevy::prelude::*;

use super::{ActionView, Persona};

/// The persona this one is chatting with. Both sides of a conversation carry one, pointing at
/// each other. Set and removed by `link_chat_partners`; game code only reads it.
#[derive(Component, Reflect, Debug, Clone, Copy, PartialEq, Eq)]
#[relationship(relationship_target = ChatPartners)]
pub struct ChattingWith(pub Entity);

impl ChattingWith {
    /// The partner.
    pub fn partner(&self) -> Entity {
        self.0
    }
}

/// The personas chatting with this one (at most one in SPEC §3.5's two-person chats), kept by
/// Bevy from their [`ChattingWith`].
#[derive(Component, Reflect, Debug, Default, PartialEq, Eq)]
#[relationship_target(relationship = ChattingWith)]
pub struct ChatPartners(Vec<Entity>);

impl ChatPartners {
    /// The partners' entities.
    pub fn entities(&self) -> &[Entity] {
        &self.0
    }
}

/// A persona whose view changed, and its current link.
type ChangedView<'a> = (Entity, &'a ActionView, Option<&'a ChattingWith>);

/// Links each persona whose view changed to the persona it is chatting with, by name, and
/// unlinks it when the chat is over. A partner name that matches no persona (or the persona
/// itself) leaves no link.
pub(crate) fn link_chat_partners(
    mut commands: Commands,
    changed: Query<ChangedView, (With<Persona>, Changed<ActionView>)>,
    personas: Query<(Entity, &Name), With<Persona>>,
) {
    // Built on the first chat that needs it: name → the first two personas of that name, in
    // query order (a persona named like its partner links to the other one).
    let mut by_name: Option<HashMap<&str, [Option<Entity>; 2]>> = None;
    for (entity, view, link) in &changed {
        let partner = view.chatting_with.as_deref().and_then(|name| {
            let by_name = by_name.get_or_insert_with(|| names(&personas));
            by_name
                .get(name)?
                .iter()
                .flatten()
                .copied()
                .find(|&other| other != entity)
        });
        match (partner, link) {
            (Some(partner), Some(link)) if link.0 == partner => {}
            (Some(partner), _) => {
                commands.entity(entity).insert(ChattingWith(partner));
            }
            (None, Some(_)) => {
                commands.entity(entity).remove::<ChattingWith>();
            }
            (None, None) => {}
        }
    }
}

/// Every persona's name → the first two personas of that name, in query order.
fn names<'a>(
    personas: &'a Query<(Entity, &Name), With<Persona>>,
) -> HashMap<&'a str, [Option<Entity>; 2]> {
    let mut by_name: HashMap<&str, [Option<Entity>; 2]> = HashMap::default();
    for (entity, name) in personas {
        let slots = by_name.entry(name.as_str()).or_default();
        if let Some(slot) = slots.iter_mut().find(|slot| slot.is_none()) {
            *slot = Some(entity);
        }
    }
    by_name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app_with(names: &[&str]) -> (App, Vec<Entity>) {
        let mut app = App::new();
        app.add_systems(Update, link_chat_partners);
        let entities = names
            .iter()
            .map(|n| {
                app.world_mut()
                    .spawn((Persona, Name::new(n.to_string())))
                    .id()
            })
            .collect();
        (app, entities)
    }

    fn chat(app: &mut App, who: Entity, with: Option<&str>) {
        let mut view = app.world_mut().get_mut::<ActionView>(who).unwrap();
        view.chatting_with = with.map(str::to_owned);
    }

    #[test]
    fn links_follow_the_views_and_despawn_unlinks() {
        let (mut app, e) = app_with(&["Ada", "Sam", "Mira"]);
        app.update();
        assert!(app.world().get::<ChattingWith>(e[0]).is_none());

        chat(&mut app, e[0], Some("Sam"));
        chat(&mut app, e[1], Some("Ada"));
        chat(&mut app, e[2], Some("Nobody"));
        app.update();
        let world = app.world();
        assert_eq!(world.get::<ChattingWith>(e[0]), Some(&ChattingWith(e[1])));
        assert_eq!(world.get::<ChattingWith>(e[1]), Some(&ChattingWith(e[0])));
        assert_eq!(world.get::<ChatPartners>(e[1]).unwrap().entities(), &[e[0]]);
        assert_eq!(world.get::<ChatPartners>(e[0]).unwrap().entities(), &[e[1]]);
        assert!(world.get::<ChattingWith>(e[2]).is_none(), "unknown name");

        // The chat ends on one side: that link goes, the other stays until its view changes.
        chat(&mut app, e[0], None);
        app.update();
        assert!(app.world().get::<ChattingWith>(e[0]).is_none());
        assert!(app.world().get::<ChatPartners>(e[1]).is_none());
        assert_eq!(
            app.world().get::<ChattingWith>(e[1]),
            Some(&ChattingWith(e[0]))
        );

        // Despawning the partner unlinks whoever chatted with it.
        app.world_mut().despawn(e[0]);
        app.world_mut().flush();
        assert!(app.world().get::<ChattingWith>(e[1]).is_none());
    }

    #[test]
    fn a_persona_never_chats_with_itself() {
        let (mut app, e) = app_with(&["Ada"]);
        chat(&mut app, e[0], Some("Ada"));
        app.update();
        assert!(app.world().get::<ChattingWith>(e[0]).is_none());
    }

    #[test]
    fn a_shared_name_links_to_the_namesake_that_is_not_oneself() {
        let (mut app, e) = app_with(&["Sam", "Sam", "Ada"]);
        chat(&mut app, e[0], Some("Sam"));
        chat(&mut app, e[1], Some("Sam"));
        chat(&mut app, e[2], Some("Sam"));
        // Whoever else asks for "Sam" gets the first Sam in query order (as the update sees it).
        let first = app
            .world_mut()
            .query_filtered::<(Entity, &Name), With<Persona>>()
            .iter(app.world())
            .find(|(_, name)| name.as_str() == "Sam")
            .map(|(entity, _)| entity);
        app.update();
        let world = app.world();
        assert_eq!(world.get::<ChattingWith>(e[0]), Some(&ChattingWith(e[1])));
        assert_eq!(world.get::<ChattingWith>(e[1]), Some(&ChattingWith(e[0])));
        assert_eq!(world.get::<ChattingWith>(e[2]).map(|c| c.0), first);
    }
}
