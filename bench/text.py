"""Plain English used to pad prompts to a given length (written for this benchmark, no licence issues).

The words matter only in that they tokenise like real text: a prompt of N tokens here is what a user's
N-token situation description costs.
"""

PASSAGE = """\
The valley road runs for eleven miles between the river ford and the old customs house, and for most of \
the year it is the only way a loaded wagon can reach the northern market. In spring the lower stretch \
floods, and the drivers wait at the ford for two or three days until the water falls. The council has \
argued for a decade about building a stone causeway, but the cost has always been larger than the tolls \
the road brings in, and every estimate has been revised upwards the moment it was written down.

This year the question is sharper than before. A rival company has opened a route through the eastern \
hills that avoids the ford entirely. It is longer, and the climb is hard on the horses, but it never \
floods, and the merchants who used it last season arrived at the market a full week before anyone who \
came by the valley. Prices at the market are highest in the first week, when the stalls are empty and \
the buyers from the coast are impatient; by the third week the same grain sells for two thirds as much.

Our scouts report three things. First, the river is already higher than it was at this time last year, \
and the snow on the upper slopes has not yet begun to melt. Second, the eastern route has a new toll gate \
at the pass, and the company that built it charges by the axle, which makes it expensive for the heavy \
wagons we use for grain but cheap for the light carts that carry cloth and salt. Third, a group of \
farmers near the customs house has offered to sell us their stored hay at a fair price if we commit \
before the end of the month, which would let us keep the horses at the ford for longer without losing \
condition.

There are other considerations. The drivers do not like the eastern route: the inns are few, the nights \
in the hills are cold, and two wagons were lost there to a rockfall in the autumn. The insurers have \
noticed and now ask for a higher premium on any load that crosses the pass. On the other hand, the \
valley road is slow even when it is dry, because the bridges at the two mills are narrow and only one \
wagon can cross at a time, and in a busy week the queue at each bridge can take half a day.

The treasurer has prepared figures for each choice. If we wait at the ford and the flood is as long as \
last year, we lose perhaps a fifth of the value of the grain but pay nothing extra. If we take the \
eastern route with every wagon, we arrive early and sell at the best price, but the tolls and the \
premium eat most of the difference, and the risk to the drivers is real. If we split the convoy, sending \
the light carts east and keeping the grain wagons in the valley, we pay less in tolls and still reach \
the market early with part of the goods, but we need twice as many guards, and the council has not \
agreed to pay for them. None of these figures includes the hay, which changes the cost of waiting.

Whatever we decide has to be decided soon. The drivers need three days to prepare the wagons, the \
guards must be hired before the fair in the next town takes every spare hand, and the farmers will sell \
their hay to someone else if we do not answer them. The council meets in four days and will accept the \
recommendation of this committee unless someone raises a serious objection.
"""

QUESTIONS = (
    "Given all of this, what should the convoy do this season?",
    "The treasurer wants one recommendation for the council. Which option should it be?",
    "If you had to commit the wagons today, which would you choose?",
    "Which plan gives the best balance of risk and reward?",
    "What is the safest course of action for the company?",
    "Which option would the drivers most likely support?",
)


def words() -> list[str]:
    return PASSAGE.split()
